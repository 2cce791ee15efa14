"""The standards advisor (issue 29) against a real server: for each rule, a workload that breaks it gives the
finding with its evidence, and a workload that keeps it gives none. Thresholds that need much traffic by default
are lowered by the advisor's configuration file, as a team would."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.api.test_test_control import control
from tests.conftest import ServerProcess

THRESHOLDS = {"hot_key_min_requests": 100, "gsi_unused_writes": 20, "monotonic_min_keys": 20,
              "collection_appends": 20, "capacity_min_seconds": 0, "scan_discard_min_scanned": 20,
              "strong_read_min": 20, "projection_all_min_reads": 10,
              "batch_burst_seconds": 5.0,  # (wide: a loaded test machine serves 10 reads slowly)
              "observe_budget": 1}  # (every request observed, however slow the machine: sampling is tested apart)
DECLARED = "advisor-declared-" + uuid.uuid4().hex[:6]
DECLARED_KEPT = "advisor-kept-" + uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def advised() -> Iterator[ServerProcess]:
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "advisor.json"
        config.write_text(json.dumps({"thresholds": THRESHOLDS, "tables": {DECLARED: {"access_patterns": [
            {"operation": "Query", "index": None, "key_condition": "pk = ?"},
            {"operation": "Query", "index": "byMissing", "key_condition": "email = ?"},
            {"operation": "Scan"}, {"operation": "Query", "key_condition": "email = ?"}]},
            DECLARED_KEPT: {"access_patterns": [{"operation": "Query", "key_condition": "pk = ?"},
                                                {"operation": "PutItem"}]}}}))
        process = ServerProcess(None, "--advisor-config", str(config))
        try:
            yield process
        finally:
            process.finish()


def client(endpoint: str, key: str = "advisor") -> Any:
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))


def table(ddb: Any, prefix: str, sort: bool = False, **extra: Any) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    keys = [{"AttributeName": "pk", "KeyType": "HASH"}] + ([{"AttributeName": "sk", "KeyType": "RANGE"}]
                                                           if sort else [])
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}] + ([{"AttributeName": "sk", "AttributeType": "S"}]
                                                                     if sort else [])
    definitions += extra.pop("definitions", [])
    ddb.create_table(TableName=name, KeySchema=keys, AttributeDefinitions=definitions,
                     **({"BillingMode": "PAY_PER_REQUEST"} | extra))
    # (point-in-time recovery on, as the standards ask: so that a clean workload's table has no finding at all)
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    return name


def report(endpoint: str, name: str | None = None) -> dict[str, Any]:
    url = endpoint + "/openddb/advisor" + (f"?table={name}" if name else "")
    with urllib.request.urlopen(url) as answer:
        return json.loads(answer.read())  # type: ignore[no-any-return]


def findings(endpoint: str, name: str, rule: str | None = None) -> list[dict[str, Any]]:
    return [finding for finding in report(endpoint, name)["findings"]
            if finding["table"] == name and (rule is None or finding["rule"] == rule)]


def test_scans_on_the_hot_path(advised: ServerProcess) -> None:
    """Scans filtering on the partition key break three scan rules; the same reads as Queries break none."""
    ddb = client(advised.endpoint)
    scanned, queried = table(ddb, "orders"), table(ddb, "orders")
    for name in (scanned, queried):
        ddb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": {"pk": {"S": f"o{i}"}}}}
                                                  for i in range(25)]})
    for _ in range(5):
        ddb.scan(TableName=scanned, FilterExpression="pk = :v", ExpressionAttributeValues={":v": {"S": "o1"}})
        ddb.query(TableName=queried, KeyConditionExpression="pk = :v", ExpressionAttributeValues={":v": {"S": "o1"}})
    hot = findings(advised.endpoint, scanned, "scan-hot-path")
    assert hot and hot[0]["evidence"]["scans"] == 5 and hot[0]["severity"] == "error"
    assert hot[0]["standard"]["sources"][0] == "000_29832dcbc49f1c2f.txt"
    assert findings(advised.endpoint, scanned, "scan-filter-instead-of-query")[0]["evidence"]["attribute"] == "pk"
    discard = findings(advised.endpoint, scanned, "scan-unpaginated")[0]["evidence"]
    assert discard["scanned"] == 125 and discard["returned"] == 5
    assert findings(advised.endpoint, queried) == []
    patterns = [row for row in report(advised.endpoint, queried)["access_patterns"] if row["operation"] == "Query"]
    assert patterns[0]["key_condition"] == "pk = ?" and patterns[0]["count"] == 5


def test_hot_and_monotonic_partition_keys(advised: ServerProcess) -> None:
    """One key taking every read, and increasing keys, are found; random keys are not."""
    ddb = client(advised.endpoint)
    hot, even = table(ddb, "events"), table(ddb, "events")
    for i in range(30):
        ddb.put_item(TableName=hot, Item={"pk": {"S": f"2026-01-01T00:00:{i:02d}"}})
        ddb.put_item(TableName=even, Item={"pk": {"S": uuid.uuid4().hex}})
    for _ in range(120):
        ddb.get_item(TableName=hot, Key={"pk": {"S": "2026-01-01T00:00:07"}})
        ddb.get_item(TableName=even, Key={"pk": {"S": uuid.uuid4().hex}})
    found = findings(advised.endpoint, hot, "hot-partition")
    assert found and found[0]["evidence"]["key"] == {"S": "2026-01-01T00:00:07"}
    assert found[0]["evidence"]["share_at_least"] >= 0.75
    monotonic = findings(advised.endpoint, hot, "monotonic-partition-key")[0]["evidence"]
    assert monotonic["increasing"] == monotonic["compared"] == 29
    assert findings(advised.endpoint, even, "hot-partition") == []
    assert findings(advised.endpoint, even, "monotonic-partition-key") == []


def test_item_contents(advised: ServerProcess) -> None:
    """Large items, blobs, mixed time formats and naming styles, plaintext secrets, packed keys and an ephemeral
    table without TTL are found; tidy items in a tidy table give no finding at all."""
    ddb = client(advised.endpoint)
    messy, tidy = table(ddb, "sessions"), table(ddb, "customers", sort=True)
    for i in range(25):
        ddb.put_item(TableName=messy, Item={
            "pk": {"S": f"USER#{i}#ORDER#{i}"}, "createdAt": {"S": "2026-01-01T00:00:00Z"},
            "created_at": {"N": "1767225600"} if i % 2 else {"S": "2026-01-01T00:00:00"},
            "password": {"S": "hunter2"}})
    ddb.batch_write_item(RequestItems={tidy: [{"PutRequest": {"Item": {
        "pk": {"S": uuid.uuid4().hex}, "sk": {"S": "profile"}, "created_at": {"S": "2026-01-01T00:00:00Z"},
        "password_hash": {"S": "$2b$12$" + "a" * 53}}}} for _ in range(25)]})
    ddb.put_item(TableName=messy, Item={"pk": {"S": "big"}, "body": {"S": "x " * 60_000}})
    ddb.put_item(TableName=messy, Item={"pk": {"S": "blob"}, "pdf": {"B": b"\x00" * 40_000}})
    rules = {finding["rule"]: finding for finding in findings(advised.endpoint, messy)}
    large = findings(advised.endpoint, messy, "item-large")
    assert large[0]["evidence"]["sizes"]["max"] > 100_000
    assert large[0]["evidence"]["largest_key"] == {"pk": {"S": "big"}}
    assert large[1]["evidence"] == {"attribute": "pdf", "blob_bytes": 40_000}
    formats = rules["timestamp-format"]["evidence"]["formats"]
    assert set(formats) == {"epoch-seconds", "iso8601-without-zone"}
    assert rules["naming-consistency"]["evidence"]["same_concept"] == [["createdAt", "created_at"]]
    assert rules["encryption-off"]["evidence"]["attributes"] == {"password": 25}
    assert "hunter2" not in json.dumps(rules["encryption-off"])
    assert rules["missing-sort-key"]["evidence"]["composite"] == 25
    assert rules["ttl-missing"]["evidence"]["table_name_ephemeral"] is True
    assert findings(advised.endpoint, tidy) == []


def test_ttl_values_and_expired_reads(advised: ServerProcess) -> None:
    """TTL in milliseconds or as a String never expires; a read of an expired item is noted; correct epoch
    seconds in the future give neither."""
    ddb = client(advised.endpoint)
    wrong, right = table(ddb, "tokens"), table(ddb, "tokens")
    for name in (wrong, right):
        ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"})
    time.sleep(1.1)  # (the advisor reads a table's description at most once a second)
    soon = int(time.time()) + 3600
    ddb.put_item(TableName=wrong, Item={"pk": {"S": "ms"}, "exp": {"N": str(soon * 1000)}})
    ddb.put_item(TableName=wrong, Item={"pk": {"S": "text"}, "exp": {"S": str(soon)}})
    ddb.put_item(TableName=wrong, Item={"pk": {"S": "past"}, "exp": {"N": str(int(time.time()) - 60)}})
    ddb.get_item(TableName=wrong, Key={"pk": {"S": "past"}})
    ddb.put_item(TableName=right, Item={"pk": {"S": "ok"}, "exp": {"N": str(soon)}})
    ddb.get_item(TableName=right, Key={"pk": {"S": "ok"}})
    problems = findings(advised.endpoint, wrong, "ttl-wrong-type")[0]["evidence"]["problems"]
    assert problems == {"epoch-milliseconds": 1, "not a Number (S)": 1}
    expired = findings(advised.endpoint, wrong, "ttl-for-immediate-delete")[0]["evidence"]
    assert expired["expired_reads"] == 1 and expired["examples"][0]["key"] == {"pk": {"S": "past"}}
    assert findings(advised.endpoint, right) == []


GSI = {"IndexName": "byEmail", "KeySchema": [{"AttributeName": "email", "KeyType": "HASH"}],
       "Projection": {"ProjectionType": "ALL"}}


def test_indexes(advised: ServerProcess) -> None:
    """An index written and never read, one read for one attribute though it projects ALL, a write refused for
    an index key of another type, and six GSIs are found; an index read for whole items is not."""
    ddb = client(advised.endpoint)
    email = [{"AttributeName": "email", "AttributeType": "S"}]
    unused, narrow, used = (table(ddb, "people", definitions=email, GlobalSecondaryIndexes=[GSI]) for _ in range(3))
    for name in (unused, narrow, used):
        ddb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": {"pk": {"S": f"p{i}"},
                                                                           "email": {"S": f"{i}@x"}}}}
                                                  for i in range(25)]})
    for i in range(10):
        ddb.query(TableName=narrow, IndexName="byEmail", KeyConditionExpression="email = :e",
                  ExpressionAttributeValues={":e": {"S": f"{i}@x"}}, ProjectionExpression="pk")
        ddb.query(TableName=used, IndexName="byEmail", KeyConditionExpression="email = :e",
                  ExpressionAttributeValues={":e": {"S": f"{i}@x"}})
    with pytest.raises(ddb.exceptions.ClientError):
        ddb.put_item(TableName=unused, Item={"pk": {"S": "n"}, "email": {"N": "7"}})
    assert findings(advised.endpoint, unused, "gsi-unused")[0]["evidence"]["index_writes"] == 25
    drift = findings(advised.endpoint, unused, "index-key-type-drift")[0]["evidence"]
    assert (drift["attribute"], drift["type_written"], drift["writes"]) == ("email", "N", 1)
    assert findings(advised.endpoint, narrow, "gsi-projection-all")[0]["evidence"]["narrow_reads"] == 10
    assert findings(advised.endpoint, used) == []
    many = table(ddb, "wide", definitions=[{"AttributeName": f"a{i}", "AttributeType": "S"} for i in range(6)],
                 GlobalSecondaryIndexes=[{**GSI, "IndexName": f"gsi{i}", "KeySchema": [
                     {"AttributeName": f"a{i}", "KeyType": "HASH"}]} for i in range(6)])
    assert len(findings(advised.endpoint, many, "gsi-too-many")[0]["evidence"]["gsis"]) == 6


def test_writes_races_transactions_batches(advised: ServerProcess) -> None:
    """A read-then-blind-write that loses another client's write, one-item transactions, strong reads and bursts
    of single puts are found; conditional writes, eventual reads and batches are not."""
    alice, bob = client(advised.endpoint, "alice"), client(advised.endpoint, "bob")
    racy, careful = table(alice, "accounts"), table(alice, "accounts")
    for name in (racy, careful):
        alice.put_item(TableName=name, Item={"pk": {"S": "a"}, "v": {"N": "1"}})
        alice.get_item(TableName=name, Key={"pk": {"S": "a"}})
    bob.put_item(TableName=racy, Item={"pk": {"S": "a"}, "v": {"N": "2"}})
    alice.put_item(TableName=racy, Item={"pk": {"S": "a"}, "v": {"N": "3"}})
    bob.put_item(TableName=careful, Item={"pk": {"S": "a"}, "v": {"N": "2"}}, ConditionExpression="v = :one",
                 ExpressionAttributeValues={":one": {"N": "1"}})
    with pytest.raises(alice.exceptions.ConditionalCheckFailedException):
        alice.put_item(TableName=careful, Item={"pk": {"S": "a"}, "v": {"N": "3"}}, ConditionExpression="v = :one",
                       ExpressionAttributeValues={":one": {"N": "1"}})
    race = findings(advised.endpoint, racy, "unconditional-shared-write")[0]["evidence"]
    assert race["races"] == 2 and race["examples"][0]["key"] == {"pk": {"S": "a"}}
    assert [example["clients"] for example in race["examples"]] == [["alice", "bob"], ["bob", "alice"]]
    alice.transact_write_items(TransactItems=[{"Put": {"TableName": racy, "Item": {"pk": {"S": "t"}}}}])
    alice.transact_write_items(TransactItems=[{"Put": {"TableName": careful, "Item": {"pk": {"S": "t1"}}}},
                                              {"Put": {"TableName": careful, "Item": {"pk": {"S": "t2"}}}}])
    for _ in range(40):
        alice.get_item(TableName=racy, Key={"pk": {"S": "a"}}, ConsistentRead=True)
    alice.batch_write_item(RequestItems={careful: [{"PutRequest": {"Item": {"pk": {"S": f"b{i}"}}}}
                                                   for i in range(25)]})
    assert findings(advised.endpoint, racy, "transaction-overuse")[0]["evidence"]["transactions"] == 1
    assert findings(advised.endpoint, racy, "strong-read-unneeded")[0]["evidence"]["strong_reads"] == 40
    assert findings(advised.endpoint, racy, "batch-opportunity")[0]["evidence"]["bursts"][0]["client"] == "alice"
    assert findings(advised.endpoint, careful) == []


def test_collections_capacity_and_destructive_changes(advised: ServerProcess) -> None:
    """Appends to one list, a provisioned table far above its use, and dropping an index that served reads are
    found; new items per event on an on-demand table are not."""
    ddb = client(advised.endpoint)
    email = [{"AttributeName": "email", "AttributeType": "S"}]
    provisioned = {"ReadCapacityUnits": 100, "WriteCapacityUnits": 100}
    grown = table(ddb, "feeds", definitions=email, BillingMode="PROVISIONED",
                  GlobalSecondaryIndexes=[{**GSI, "ProvisionedThroughput": provisioned}],
                  ProvisionedThroughput={"ReadCapacityUnits": 100, "WriteCapacityUnits": 100})
    events = table(ddb, "feeds", sort=True)
    for i in range(25):
        ddb.update_item(TableName=grown, Key={"pk": {"S": "f"}}, UpdateExpression="SET l = list_append("
                        "if_not_exists(l, :empty), :one)", ExpressionAttributeValues={":empty": {"L": []},
                                                                                      ":one": {"L": [{"N": str(i)}]}})
    ddb.batch_write_item(RequestItems={events: [{"PutRequest": {"Item": {"pk": {"S": "f"}, "sk": {"S": f"{i:04d}"}}}}
                                                for i in range(25)]})
    ddb.query(TableName=grown, IndexName="byEmail", KeyConditionExpression="email = :e",
              ExpressionAttributeValues={":e": {"S": "x"}})
    ddb.update_table(TableName=grown, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byEmail"}}])
    appends = findings(advised.endpoint, grown, "unbounded-collection")[0]["evidence"]["attributes"]
    assert appends == [{"attribute": "l", "appends": 25}]
    capacity = findings(advised.endpoint, grown, "capacity-mode")
    assert capacity and "over-provisioned" in capacity[0]["message"]
    change = findings(advised.endpoint, grown, "schema-destructive-change")[0]["evidence"]
    assert change["change"] == "UpdateTable deleting index byEmail" and change["reads_before"] == 1
    assert findings(advised.endpoint, events) == []


def test_declared_access_patterns_and_state(advised: ServerProcess) -> None:
    """With declared patterns, an undeclared one, a declared one never served, one naming an index the table lacks
    and a Query the table's key cannot serve (no equality on its partition key) are reported; a table
    without point-in-time recovery is reported until it is turned on; the store's encryption is "not checked"
    here, never a pass."""
    ddb = client(advised.endpoint)
    ddb.create_table(TableName=DECLARED, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    ddb.query(TableName=DECLARED, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "x"}})
    ddb.get_item(TableName=DECLARED, Key={"pk": {"S": "x"}})
    kinds = {(f["evidence"]["kind"], f["evidence"]["operation"], f["evidence"]["index"])
             for f in findings(advised.endpoint, DECLARED, "access-pattern-undeclared")}
    assert kinds == {("observed-undeclared", "GetItem", None), ("declared-unserved", "Query", "byMissing"),
                     ("declared-unserved", "Scan", None), ("declared-unserved", "Query", None)}
    unservable = [f["evidence"] for f in findings(advised.endpoint, DECLARED, "access-pattern-undeclared")
                  if f["evidence"].get("key_mismatch")]
    assert [(e["key_condition"], e["key_mismatch"]) for e in unservable] == [
        ("email = ?", "no equality on the partition key pk")]
    unchecked = {(entry["rule"], entry["table"]) for entry in report(advised.endpoint, DECLARED)["not_checked"]}
    assert ("encryption-off", DECLARED) in unchecked
    (pitr,) = findings(advised.endpoint, DECLARED, "pitr-off")
    assert pitr["evidence"] == {"PointInTimeRecoveryStatus": "DISABLED"}
    ddb.update_continuous_backups(TableName=DECLARED,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    assert findings(advised.endpoint, DECLARED, "pitr-off") == []


def test_declared_access_patterns_kept(advised: ServerProcess) -> None:
    """A table whose traffic is its declared patterns, each of them used, breaks no rule at all."""
    ddb = client(advised.endpoint)
    ddb.create_table(TableName=DECLARED_KEPT, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    ddb.update_continuous_backups(TableName=DECLARED_KEPT,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    ddb.put_item(TableName=DECLARED_KEPT, Item={"pk": {"S": "x"}})
    ddb.query(TableName=DECLARED_KEPT, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "x"}})
    assert findings(advised.endpoint, DECLARED_KEPT) == []
    assert "access-pattern-undeclared" not in {entry["rule"] for entry in
                                               report(advised.endpoint, DECLARED_KEPT)["not_checked"]}


def test_broad_policies(advised: ServerProcess) -> None:
    """An IAM user's policy granting dynamodb:* on every resource is found; a narrow one is not."""
    iam = boto3.client("iam", endpoint_url=advised.endpoint, region_name="us-east-1", aws_access_key_id="root",
                       aws_secret_access_key="x")
    broad, narrow = f"broad-{uuid.uuid4().hex[:6]}", f"narrow-{uuid.uuid4().hex[:6]}"
    for user, action, resource in ((broad, "dynamodb:*", "*"),
                                   (narrow, "dynamodb:GetItem", "arn:aws:dynamodb:*:*:table/orders")):
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": action, "Resource": resource}]}))
    found = [f for f in report(advised.endpoint)["findings"] if f["rule"] == "least-privilege"]
    principals = {f["evidence"]["principal"]: f["evidence"]["grants"] for f in found}
    assert principals[f"user {broad}"] == ["Action dynamodb:*", "Resource *"]
    assert f"user {narrow}" not in principals


def test_advise_command_formats(advised: ServerProcess) -> None:
    """`openddb advise` prints SARIF 2.1.0 and JUnit XML, and --fail-on error exits 1 on an error finding."""
    ddb = client(advised.endpoint)
    name = table(ddb, "reports")
    for _ in range(5):
        ddb.scan(TableName=name)

    def advise(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "openddb", "advise", "--endpoint", advised.endpoint,
                               "--table", name, *extra], capture_output=True, text=True, timeout=60)

    sarif = advise("--format", "sarif", "--fail-on", "error")
    assert sarif.returncode == 1, sarif.stderr
    document = json.loads(sarif.stdout)
    assert document["version"] == "2.1.0"
    assert [r["ruleId"] for r in document["runs"][0]["results"]] == ["scan-hot-path"]
    junit = ElementTree.fromstring(advise("--format", "junit").stdout)
    failed = [case.get("name") for case in junit.iter("testcase") if case.find("failure") is not None]
    assert failed == ["scan-hot-path"]
    text = advise("--since", "10m")
    assert text.returncode == 0 and "scan-hot-path" in text.stdout and "Observed access patterns" in text.stdout
    later = advise("--format", "json", "--since", str(time.time() + 60))
    assert json.loads(later.stdout)["findings"] == []
    # A table whose one finding is a warning (point-in-time recovery off): --fail-on error passes, warning fails.
    warned = f"unbacked-{uuid.uuid4().hex[:8]}"
    ddb.create_table(TableName=warned, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    for fail_on, status in (("error", 0), ("warning", 1)):
        done = subprocess.run([sys.executable, "-m", "openddb", "advise", "--endpoint", advised.endpoint, "--table",
                               warned, "--fail-on", fail_on], capture_output=True, text=True, timeout=60)
        assert done.returncode == status and "WARNING pitr-off" in done.stdout, (fail_on, done.stdout)
    with socket.socket() as unused:  # (a port nothing listens on: the report cannot be read)
        unused.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{unused.getsockname()[1]}"
    unreachable = subprocess.run([sys.executable, "-m", "openddb", "advise", "--endpoint", nowhere],
                                 capture_output=True, text=True, timeout=60)
    assert unreachable.returncode == 2 and "openddb advise:" in unreachable.stderr


def test_throttled_retries_without_backoff(tmp_path: Path) -> None:
    """A client sending the same throttled PutItem again at once breaks throttle-no-backoff and
    missing-idempotency; one that backs off exponentially and writes conditionally breaks neither. (A retry
    within 100 ms counts as immediate here: a loaded test machine's boto3 takes several ms a call.)"""
    config = tmp_path / "advisor.json"
    config.write_text(json.dumps({"thresholds": {"backoff_seconds": 0.1}}))
    process = ServerProcess(None, "--throttling", "on", "--advisor-config", str(config))
    try:
        ddb = boto3.client("dynamodb", endpoint_url=process.endpoint, region_name="us-east-1",
                           aws_access_key_id="advisor", aws_secret_access_key="x",
                           config=Config(retries={"total_max_attempts": 1}))  # (no retry of botocore's own)
        units = {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}
        eager, patient = (table(ddb, "ledger", BillingMode="PROVISIONED", ProvisionedThroughput=units)
                          for _ in range(2))
        big = {"S": "x" * 9000}  # (9 write units a put: the burst capacity of 1 WCU is spent within 40 puts)
        throttled = 0
        for _ in range(60):
            try:
                ddb.put_item(TableName=eager, Item={"pk": {"S": "same"}, "body": big})
            except ddb.exceptions.ProvisionedThroughputExceededException:
                throttled += 1
        assert throttled >= 3
        delay = 0.2
        for i in range(50):
            try:
                ddb.put_item(TableName=patient, Item={"pk": {"S": f"p{i}"}, "body": big},
                             ConditionExpression="attribute_not_exists(pk)")
            except ddb.exceptions.ProvisionedThroughputExceededException:
                time.sleep(delay)
                delay *= 2
                if delay > 1:
                    break
        quick = findings(process.endpoint, eager, "throttle-no-backoff")[0]["evidence"]
        assert quick["clients"][0]["quick_retries_in_a_row"] >= 3 and quick["throttled_requests"] == throttled
        repeated = findings(process.endpoint, eager, "missing-idempotency")[0]["evidence"]["examples"]
        assert repeated[0]["operation"] == "PutItem" and repeated[0]["client"] == "advisor"
        assert findings(process.endpoint, patient, "throttle-no-backoff") == []
        assert findings(process.endpoint, patient, "missing-idempotency") == []
    finally:
        process.finish()


def test_auto_off_and_misconfigured(tmp_path: Path) -> None:
    """By default (auto) a server of one process advises, and one of several workers does not (each would see a part
    of the traffic); --advisor off gives no report (404); a configuration file with an unknown threshold stops the
    server at start with the reason and exit status 2."""
    def status(process: ServerProcess) -> int:
        try:
            with urllib.request.urlopen(process.endpoint + "/openddb/advisor") as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            refused.close()
            return refused.code

    for extra, expected in ((("--workers", "1"), 200), (("--workers", "2"), 404),
                            (("--workers", "1", "--advisor", "off"), 404)):
        process = ServerProcess(str(tmp_path / f"data-{len(extra)}-{extra[1]}"), *extra)
        try:
            assert status(process) == expected, extra
        finally:
            process.finish()
    config = tmp_path / "advisor.json"
    config.write_text(json.dumps({"thresholds": {"scans_per_hour": 3}}))
    done = subprocess.run([sys.executable, "-m", "openddb", "serve", "--in-memory", "--port", "0", "--advisor", "on",
                           "--advisor-config", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unknown threshold 'scans_per_hour'" in done.stderr


def test_a_refused_request_of_any_shape_is_observed(advised: ServerProcess) -> None:
    """The observation point reads the tables a refused request names: TransactItems that is a number is
    DynamoDB's SerializationException (it was a body-less 400 when the record's reading of it raised)."""
    connection = http.client.HTTPConnection("127.0.0.1", advised.port, timeout=10)
    connection.request("POST", "/", body=b'{"TransactItems": 1.5e+308}', headers={
        "X-Amz-Target": "DynamoDB_20120810.TransactGetItems", "Content-Type": "application/x-amz-json-1.0",
        "Authorization": "AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/dynamodb/aws4_request, "
                         "SignedHeaders=host, Signature=x"})
    answer = connection.getresponse()
    body = json.loads(answer.read())
    connection.close()
    assert answer.status == 400 and body["__type"].endswith("SerializationException")


def test_malformed_refused_requests_are_left_unobserved(advised: ServerProcess) -> None:
    """Refused requests with members of any JSON type (KeyConditions a string, GlobalSecondaryIndexUpdates a
    number) are answered as DynamoDB answers them; the advisor leaves them unobserved and logs nothing (the
    module's server log must hold no traceback)."""
    ddb = client(advised.endpoint)
    name = table(ddb, "malformed")
    for target, body in (("Query", {"TableName": name, "KeyConditions": "pk"}),
                         ("UpdateTable", {"TableName": name, "GlobalSecondaryIndexUpdates": 7}),
                         ("Scan", {"TableName": name, "ScanFilter": [1]})):
        connection = http.client.HTTPConnection("127.0.0.1", advised.port, timeout=10)
        connection.request("POST", "/", body=json.dumps(body).encode(), headers={
            "X-Amz-Target": f"DynamoDB_20120810.{target}", "Content-Type": "application/x-amz-json-1.0",
            "Authorization": "AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/dynamodb/aws4_request, "
                             "SignedHeaders=host, Signature=x"})
        answer = connection.getresponse()
        assert answer.status == 400 and "__type" in json.loads(answer.read())
        connection.close()
    assert "Traceback" not in advised.output()


def test_sampling_above_the_time_budget(tmp_path: Path) -> None:
    """With the time budget spent (observe_budget 0: at once), one successful GetItem or PutItem in sample_every is
    observed and counted for the ones passed over: the pattern counts and the hot key's share stay right within a
    sample's error, a large item is observed all the same, and a Scan (never sampled) is counted exactly."""
    config = tmp_path / "advisor.json"
    config.write_text(json.dumps({"thresholds": {"observe_budget": 0, "sample_every": 4, "hot_key_min_requests": 100}}))
    process = ServerProcess(None, "--advisor-config", str(config))
    try:
        ddb = client(process.endpoint)
        name = table(ddb, "sampled")
        for i in range(200):
            ddb.get_item(TableName=name, Key={"pk": {"S": "hot" if i % 2 else f"k{i}"}})
        ddb.put_item(TableName=name, Item={"pk": {"S": "big"}, "body": {"S": "x" * 120_000}})
        for _ in range(3):
            ddb.scan(TableName=name)
        seen = report(process.endpoint, name)
        gets = [row for row in seen["access_patterns"] if row["operation"] == "GetItem"]
        assert gets[0]["count"] == 200 and gets[0]["read_units"] == 100.0
        assert seen["window"]["requests_passed_over"] >= 150
        scans = [row for row in seen["access_patterns"] if row["operation"] == "Scan"]
        assert scans[0]["count"] == 3
        large = findings(process.endpoint, name, "item-large")
        assert large and large[0]["evidence"]["largest_key"] == {"pk": {"S": "big"}}
        hot = findings(process.endpoint, name, "hot-partition")
        assert hot and hot[0]["evidence"]["key"] == {"S": "hot"} and hot[0]["evidence"]["share_at_least"] >= 0.4
    finally:
        process.finish()


def test_reports_over_a_window(tmp_path: Path) -> None:
    """Observations are kept by the minute (by the hour after an hour) and forgotten after retention_hours: a report
    `since` a moment counts what happened from then on alone, a merged hour keeps its counts, and past the retention
    a table's traffic is gone from the report. (The server's clock is moved with --dev's control endpoint.)"""
    config = tmp_path / "advisor.json"
    config.write_text(json.dumps({"thresholds": {"observe_budget": 1, "retention_hours": 2}}))
    process = ServerProcess(None, "--dev", "--advisor-config", str(config))
    try:
        ddb = client(process.endpoint)
        name = table(ddb, "windowed")
        ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})
        for _ in range(5):
            ddb.scan(TableName=name)

        def counts(since: float | None = None) -> tuple[dict[str, int], set[str]]:
            query = f"table={name}" + ("" if since is None else f"&since={since}")
            with urllib.request.urlopen(f"{process.endpoint}/openddb/advisor?{query}") as answer:
                seen = json.loads(answer.read())
            return ({row["operation"]: row["count"] for row in seen["access_patterns"]},
                    {finding["rule"] for finding in seen["findings"]})

        assert counts() == ({"PutItem": 1, "Scan": 5}, {"scan-hot-path"})
        control(process, "POST", "/openddb/clock", {"advance": 20 * 60})
        for _ in range(10):
            ddb.query(TableName=name, KeyConditionExpression="pk = :v", ExpressionAttributeValues={":v": {"S": "a"}})
        now = control(process, "GET", "/openddb/clock")[1]["now"]
        assert counts(now - 600) == ({"Query": 10}, set())  # (the last ten minutes: no Scan in them)
        assert counts() == ({"PutItem": 1, "Scan": 5, "Query": 10}, {"scan-hot-path"})
        control(process, "POST", "/openddb/clock", {"advance": 70 * 60})
        ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})  # (the first minutes, over an hour old: merged)
        now = control(process, "GET", "/openddb/clock")[1]["now"]
        assert counts() == ({"PutItem": 1, "Scan": 5, "Query": 10, "GetItem": 1}, {"scan-hot-path"})
        assert counts(now - 600) == ({"GetItem": 1}, set())
        control(process, "POST", "/openddb/clock", {"advance": 3 * 3600})  # (past the retention: all forgotten)
        assert counts() == ({}, set())
    finally:
        process.finish()


def test_calls_passed_over_are_counted_by_the_next_second(tmp_path: Path) -> None:
    """Once a second's budget is spent, calls are passed over until one in `sample_every` stands for them; a new
    second's first call stands for them too, so a client whose calls never reach `sample_every` is still counted
    whole (before, up to `sample_every` - 1 of its calls were never counted)."""
    config = tmp_path / "advisor.json"
    config.write_text(json.dumps({"thresholds": {"observe_budget": 1e-9, "sample_every": 1000}}))
    process = ServerProcess(None, "--advisor", "on", "--advisor-config", str(config))
    try:
        ddb = client(process.endpoint)
        name = table(ddb, "slow")
        for i in range(20):
            ddb.put_item(TableName=name, Item={"pk": {"S": f"k{i}"}})
        time.sleep(1.2)  # (a new second of the budget)
        ddb.put_item(TableName=name, Item={"pk": {"S": "last"}})
        with urllib.request.urlopen(f"{process.endpoint}/openddb/advisor?table={name}") as answer:
            report = json.loads(answer.read())
        observed, passed_over = report["window"]["requests_observed"], report["window"]["requests_passed_over"]
        assert observed == 21 and 0 < passed_over < 21
        puts = [pattern for pattern in report["access_patterns"] if pattern["operation"] == "PutItem"]
        assert sum(pattern["count"] for pattern in puts) == 21
    finally:
        process.finish()


def test_the_request_counts_cover_the_window(tmp_path: Path) -> None:
    """The report's requests_observed and requests_passed_over count the calls on the tables it reports within its
    window, as the rest of it does: calls before `since` are left out, another table's are not counted in a report
    of one table, and past the retention none are. (observe_budget 0 samples at once: one GetItem in 4 is observed
    and stands for the 3 passed over; Scans are never sampled. The clock is moved with --dev's control endpoint.)"""
    config = tmp_path / "advisor.json"
    config.write_text(json.dumps({"thresholds": {"observe_budget": 0, "sample_every": 4, "retention_hours": 2}}))
    process = ServerProcess(None, "--dev", "--advisor-config", str(config))
    try:
        ddb = client(process.endpoint)
        name, other = table(ddb, "counted"), table(ddb, "uncounted")

        def counted(table_name: str | None = None, since: float | None = None) -> tuple[int, int]:
            query = "&".join(part for part in (table_name and f"table={table_name}",
                                               since is not None and f"since={since}") if part)
            with urllib.request.urlopen(f"{process.endpoint}/openddb/advisor?{query}") as answer:
                window = json.loads(answer.read())["window"]
            return window["requests_observed"], window["requests_passed_over"]

        for i in range(40):
            ddb.get_item(TableName=name, Key={"pk": {"S": f"k{i}"}})
        for _ in range(3):
            ddb.scan(TableName=name)
        for _ in range(2):
            ddb.scan(TableName=other)
        assert counted(name) == (43, 30)
        assert counted() == (45, 30)
        control(process, "POST", "/openddb/clock", {"advance": 20 * 60})
        for i in range(8):
            ddb.get_item(TableName=name, Key={"pk": {"S": f"k{i}"}})
        now = control(process, "GET", "/openddb/clock")[1]["now"]
        assert counted(name, now - 600) == (8, 6)  # (the last ten minutes: the later GetItems alone)
        assert counted(None, now - 600) == (8, 6)  # (the other table: no call within them)
        assert counted(name) == (51, 36)
        control(process, "POST", "/openddb/clock", {"advance": 3 * 3600})  # (past the retention)
        assert counted(name) == (0, 0) and counted() == (0, 0)
    finally:
        process.finish()
