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


def test_stream_records_of_both_nodes_appear_once_in_order(nodes: list[ServerProcess]) -> None:
    """Writers on two nodes increment shared items under a condition; the stream, read through either node,
    holds every acknowledged change exactly once, and each item's records in the order its changes committed."""
    one = make_client(nodes[0].endpoint)
    streams = make_client(nodes[1].endpoint, "dynamodbstreams")
    table = unique_name("nodes-stream")
    arn = one.create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    keys = [f"k{i}" for i in range(4)]
    acknowledged: list[tuple[str, int]] = []
    lock = threading.Lock()

    def writer(index: int) -> None:
        client = make_client(nodes[index % 2].endpoint)
        for round_ in range(15):
            key = keys[(index + round_) % len(keys)]
            while True:
                found = client.get_item(TableName=table, Key={"pk": {"S": key}}, ConsistentRead=True).get("Item")
                seen = int(found["n"]["N"]) if found else 0
                try:
                    client.put_item(TableName=table, Item={"pk": {"S": key}, "n": {"N": str(seen + 1)}},
                                    ConditionExpression="attribute_not_exists(n) OR n = :seen",
                                    ExpressionAttributeValues={":seen": {"N": str(seen)}})
                except ClientError as error:
                    if error.response["Error"]["Code"] in ("ConditionalCheckFailedException",
                                                           "TransactionConflictException"):
                        continue
                    raise
                with lock:
                    acknowledged.append((key, seen + 1))
                break

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seen_versions: dict[str, list[int]] = {key: [] for key in keys}
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            for record in page["Records"]:
                image = record["dynamodb"]["NewImage"]
                seen_versions[image["pk"]["S"]].append(int(image["n"]["N"]))
            iterator = page.get("NextShardIterator") if page["Records"] else None
    assert sum(map(len, seen_versions.values())) == len(acknowledged) == 90
    for key in keys:  # one shard per item (no rollover here): its records in commit order, each version once
        assert seen_versions[key] == list(range(1, len(seen_versions[key]) + 1))
    one.delete_table(TableName=table)
