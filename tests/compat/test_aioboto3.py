"""aioboto3: the asynchronous client and resource, on an event loop, through the same scenario."""

from __future__ import annotations

import asyncio

import pytest

from tests.compat.conftest import ITEMS, KEYS, PAGE
from tests.conftest import unique_name

aioboto3 = pytest.importorskip("aioboto3")


async def scenario(endpoint: str) -> None:
    session = aioboto3.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
    name = unique_name("aioboto3")
    async with session.client("dynamodb", endpoint_url=endpoint) as client, \
            session.resource("dynamodb", endpoint_url=endpoint) as resource:
        await client.create_table(TableName=name, **KEYS)
        await client.get_waiter("table_exists").wait(TableName=name)
        table = await resource.Table(name)
        async with table.batch_writer() as batch:
            for n in range(ITEMS):
                await batch.put_item(Item={"pk": "c", "sk": f"o{n}", "status": "open"})
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            await table.put_item(Item={"pk": "c", "sk": "o0", "status": "open"},
                                 ConditionExpression="attribute_not_exists(pk)")
        await client.transact_write_items(TransactItems=[
            {"Update": {"TableName": name, "Key": {"pk": {"S": "c"}, "sk": {"S": "o1"}},
                        "UpdateExpression": "SET #s = :shipped", "ConditionExpression": "#s = :open",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": {":shipped": {"S": "shipped"}, ":open": {"S": "open"}}}},
            {"ConditionCheck": {"TableName": name, "Key": {"pk": {"S": "c"}, "sk": {"S": "o2"}},
                                "ConditionExpression": "attribute_exists(pk)"}}])
        paginator = client.get_paginator("query")
        pages = [page async for page in paginator.paginate(
            TableName=name, KeyConditionExpression="pk = :c", ExpressionAttributeValues={":c": {"S": "c"}},
            PaginationConfig={"PageSize": PAGE})]
        assert [item["sk"]["S"] for page in pages for item in page["Items"]] == [f"o{n}" for n in range(ITEMS)]
        assert len(pages) >= ITEMS // PAGE
        shipped = await table.query(IndexName="by_status", KeyConditionExpression="#s = :s",
                                    ExpressionAttributeNames={"#s": "status"},
                                    ExpressionAttributeValues={":s": "shipped"})
        assert [item["sk"] for item in shipped["Items"]] == ["o1"]
        await client.delete_table(TableName=name)


def test_aioboto3_scenario(server):
    asyncio.run(scenario(server.endpoint))
