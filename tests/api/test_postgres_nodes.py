"""Stateless nodes: two `openddb serve --engine postgresql://...` processes over one PostgreSQL database."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, create_table, make_client, unique_name

POSTGRES_URL = os.environ.get("OPENDDB_TEST_POSTGRES")
pytestmark = pytest.mark.skipif(not POSTGRES_URL, reason="set OPENDDB_TEST_POSTGRES to a postgresql:// URL")


@pytest.fixture(scope="module")
def nodes() -> Iterator[list[ServerProcess]]:
    processes = [ServerProcess(None, "--engine", str(POSTGRES_URL)) for _ in range(2)]
    try:
        yield processes
    finally:
        for process in processes:
            process.stop()
        for process in processes:
            process.finish()


def test_table_and_items_are_shared(nodes: list[ServerProcess]) -> None:
    """A table created on one node is usable on the other at once; a write on one is read on the other."""
    one, two = make_client(nodes[0].endpoint), make_client(nodes[1].endpoint)
    table = create_table(one, unique_name("shared"), range_type=None)
    two.put_item(TableName=table, Item={"pk": {"S": "a"}, "v": {"S": "from two"}})
    assert one.get_item(TableName=table, Key={"pk": {"S": "a"}}, ConsistentRead=True)["Item"]["v"] == {
        "S": "from two"}
    assert table in two.list_tables(Limit=100, ExclusiveStartTableName=table[:-1])["TableNames"]
    one.delete_table(TableName=table)
    with pytest.raises(ClientError) as excinfo:
        two.describe_table(TableName=table)
    assert excinfo.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_conditional_increments_across_nodes_are_exact(nodes: list[ServerProcess]) -> None:
    """50 clients, spread over two nodes, each add 1 under a condition on the current value: the total is +50."""
    setup = make_client(nodes[0].endpoint)
    table = create_table(setup, unique_name("counter"), range_type=None)
    setup.put_item(TableName=table, Item={"pk": {"S": "c"}, "n": {"N": "0"}})
    errors: list[str] = []

    def client_run(index: int) -> None:
        client = make_client(nodes[index % 2].endpoint)
        while True:
            current = client.get_item(TableName=table, Key={"pk": {"S": "c"}}, ConsistentRead=True)["Item"]["n"]
            try:
                client.update_item(TableName=table, Key={"pk": {"S": "c"}}, UpdateExpression="SET n = n + :one",
                                   ConditionExpression="n = :seen",
                                   ExpressionAttributeValues={":one": {"N": "1"}, ":seen": current})
                return
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    errors.append(str(error))
                    return

    threads = [threading.Thread(target=client_run, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:3]
    item = setup.get_item(TableName=table, Key={"pk": {"S": "c"}}, ConsistentRead=True)["Item"]
    assert item["n"] == {"N": "50"}


def test_unconditional_increments_across_nodes_are_never_lost(nodes: list[ServerProcess]) -> None:
    """50 clients over two nodes each run ADD n 1 (a read-modify-write in the server): exactly +50."""
    setup = make_client(nodes[1].endpoint)
    table = create_table(setup, unique_name("adder"), range_type=None)
    errors: list[str] = []

    def client_run(index: int) -> None:
        try:
            make_client(nodes[index % 2].endpoint).update_item(
                TableName=table, Key={"pk": {"S": "c"}}, UpdateExpression="ADD n :one",
                ExpressionAttributeValues={":one": {"N": "1"}})
        except ClientError as error:
            errors.append(str(error))

    threads = [threading.Thread(target=client_run, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:3]
    assert setup.get_item(TableName=table, Key={"pk": {"S": "c"}})["Item"]["n"] == {"N": "50"}
