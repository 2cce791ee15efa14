"""A GSI's own partitions (`--throttling on`): a GSI partition key that receives more than a partition's 1,000 WCU
a second throttles the writes that would put items under it (IndexWriteKeyRangeThroughputExceeded, the index's
ARN) while the table's own keys are spread evenly, and a Query on that key is throttled while its partition is
spent (IndexReadKeyRangeThroughputExceeded); the same writes spread over many GSI keys are served."""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, one_try_client, unique_name

_UNITS = 300  # WCU an item, in the table and in its GSI (which projects ALL)
_BIG = _UNITS * 1024 - 100
_RATE = 1300 / _UNITS  # items a second: 1,300 WCU a second, 1.3 times a partition's limit
_INDEX = "by-g"


def _table(ddb: Any, name: str) -> None:
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "g", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     GlobalSecondaryIndexes=[{"IndexName": _INDEX, "Projection": {"ProjectionType": "ALL"},
                                              "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}]}])


def _refusal(error: ClientError) -> tuple[str, str]:
    """(reason, resource) of an on-demand table's throttle."""
    assert error.response["Error"]["Code"] == "ThrottlingException", error.response
    reason = error.response["throttlingReasons"][0]  # (as botocore's model names the member there)
    return reason["reason"], reason["resource"]


def _drive(ddb: Any, tables: dict[str, bool], seconds: float) -> dict[str, list[tuple[float, str | None]]]:
    """Put 300 KB items at _RATE a second in each table, each under a new table key; its GSI key one for all
    (`tables[name]` True) or a new one each: per table, (when, the refusal's reason or None)."""
    outcomes: dict[str, list[tuple[float, str | None]]] = {name: [] for name in tables}
    start, step = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        time.sleep(max(0.0, start + step / _RATE - time.monotonic()))
        for name, hot in tables.items():
            item = {"pk": {"S": f"key{step}"}, "g": {"S": "same" if hot else f"g{step}"}, "data": {"S": "x" * _BIG}}
            reason = None
            try:
                ddb.put_item(TableName=name, Item=item)
            except ClientError as error:
                reason, resource = _refusal(error)
                assert resource.endswith(f":table/{name}/index/{_INDEX}"), resource
            outcomes[name].append((time.monotonic() - start, reason))
        step += 1
    return outcomes


def test_a_hot_gsi_key_throttles_writes_and_queries_while_the_tables_keys_are_even(tmp_path: Any) -> None:
    """Every put has a table key of its own (spread over the table's partitions), at 1,300 WCU a second: with one
    GSI key for all they are refused from about the fourth second (IndexWriteKeyRangeThroughputExceeded) and no more
    than a partition's 1,000 WCU a second is served; with a GSI key each, none is refused. Then, while the hot GSI
    partition is spent, a Query on its key is refused (IndexReadKeyRangeThroughputExceeded) and one on another key of
    the index is served."""
    server = ServerProcess(str(tmp_path), "--throttling", "on")
    try:
        ddb = one_try_client(server)
        hot, even = unique_name("gsihot"), unique_name("gsieven")
        _table(ddb, hot)
        _table(ddb, even)
        ddb.put_item(TableName=hot, Item={"pk": {"S": "cold"}, "g": {"S": "cold"}})
        outcomes = _drive(ddb, {hot: True, even: False}, 8.0)
        assert [reason for _, reason in outcomes[even] if reason] == [], outcomes[even]
        late = [reason for at, reason in outcomes[hot] if at >= 4.0]
        assert late and set(late) - {None} == {"IndexWriteKeyRangeThroughputExceeded"}, outcomes[hot]
        assert late.count(None) * _UNITS / 4.0 <= 1000 + _UNITS, outcomes[hot]
        query = {"TableName": hot, "IndexName": _INDEX, "KeyConditionExpression": "g = :g", "Limit": 1}
        refused = []
        for _ in range(20):  # (spend the hot partition with puts until one is refused, then query it at once)
            try:
                ddb.put_item(TableName=hot, Item={"pk": {"S": "again"}, "g": {"S": "same"}, "data": {"S": "x" * _BIG}})
                continue
            except ClientError:
                pass
            try:
                ddb.query(**query, ExpressionAttributeValues={":g": {"S": "same"}})
            except ClientError as error:
                refused.append(_refusal(error))
                assert ddb.query(**query, ExpressionAttributeValues={":g": {"S": "cold"}})["Count"] == 1
                break
        assert refused and refused[0][0] == "IndexReadKeyRangeThroughputExceeded", refused
        assert refused[0][1].endswith(f":table/{hot}/index/{_INDEX}")
    finally:
        server.finish()
