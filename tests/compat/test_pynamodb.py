"""PynamoDB: models with a global index, conditional saves, TransactWrite, batch_write, queries in pages."""

from __future__ import annotations

import pytest

from tests.compat.conftest import ITEMS, PAGE
from tests.conftest import unique_name

pynamodb = pytest.importorskip("pynamodb")

from pynamodb.attributes import NumberAttribute, UnicodeAttribute  # noqa: E402
from pynamodb.connection import Connection  # noqa: E402
from pynamodb.exceptions import PutError, TransactWriteError  # noqa: E402
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex  # noqa: E402
from pynamodb.models import Model  # noqa: E402
from pynamodb.transactions import TransactWrite  # noqa: E402


def models(endpoint: str):  # type: ignore[no-untyped-def]
    name = unique_name("pynamodb")

    class ByStatus(GlobalSecondaryIndex):  # type: ignore[type-arg]
        class Meta:
            index_name = "by_status"
            projection = AllProjection()

        status = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)

    class Order(Model):
        class Meta:
            table_name = name
            host = endpoint
            region = "us-east-1"
            aws_access_key_id = "test"
            aws_secret_access_key = "test"
            billing_mode = "PAY_PER_REQUEST"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        status = UnicodeAttribute()
        total = NumberAttribute(default=0)
        by_status = ByStatus()

    return Order


def test_pynamodb_scenario(server):
    Order = models(server.endpoint)
    Order.create_table(wait=True)
    with Order.batch_write() as batch:
        for n in range(ITEMS):
            batch.save(Order("customer", f"o{n}", status="open", total=n))
    Order("customer", "new", status="open").save(condition=Order.pk.does_not_exist())
    with pytest.raises(PutError) as excinfo:
        Order("customer", "new", status="open").save(condition=Order.pk.does_not_exist())
    assert excinfo.value.cause_response_code == "ConditionalCheckFailedException"

    connection = Connection(host=server.endpoint, region="us-east-1", aws_access_key_id="test",
                            aws_secret_access_key="test")
    with TransactWrite(connection=connection) as transaction:
        transaction.update(Order("customer", "o1"), actions=[Order.status.set("shipped")],
                           condition=Order.status == "open")
        transaction.delete(Order("customer", "new"))
    with pytest.raises(TransactWriteError), TransactWrite(connection=connection) as transaction:
        transaction.update(Order("customer", "o1"), actions=[Order.status.set("open")],
                           condition=Order.status == "open")

    pages = Order.query("customer", page_size=PAGE)
    assert [order.sk for order in pages] == sorted(f"o{n}" for n in range(ITEMS))
    assert pages.last_evaluated_key is None
    assert [order.sk for order in Order.by_status.query("shipped")] == ["o1"]
    assert Order.by_status.count("open") == ITEMS - 1
    Order.delete_table()
