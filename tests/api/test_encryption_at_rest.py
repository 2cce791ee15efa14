"""Encryption at rest of the embedded store (`--encryption-key-file`, `$OPENDDB_ENCRYPTION_KEY`,
`--encryption-key-command`): known item keys and values, written through every path that stores them (the table, a
global secondary index, a stream, point-in-time recovery's log, an on-demand backup, an IAM secret, a whole-store
copy), are found in no file under the data dir, while the server runs and after a kill -9; the same scenario
without a key finds them (so the search can fail). The key opens the store again with nothing lost; a wrong key,
no key, or a key for a plaintext store is refused with a clear line; SSEDescription tells the truth; `openddb
rekey` rotates the key and turns encryption on and off."""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from tests.api.identity_helpers import ROOT_KEY, ROOT_SECRET, client
from tests.api.test_backups import wait_available
from tests.api.writers import wait_for, writing
from tests.conftest import ServerProcess, create_table, make_client, unique_name

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")),
                                reason="encrypts the embedded store (PostgreSQL's encryption is its operator's)")

TABLE_MARKER = "TblCatalogMarker"  # (in the table's name: the catalog)


def openddb(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openddb", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


def key_file(folder: Path, name: str = "key") -> str:
    path = folder / name
    path.write_text(secrets.token_hex(32) + "\n")
    path.chmod(0o600)
    return str(path)


def start(data_dir: Path, *extra: str) -> ServerProcess:
    return ServerProcess(str(data_dir), "--workers", "2", "--auth", "verify", "--root-credentials",
                         f"{ROOT_KEY}:{ROOT_SECRET}", *extra)


def write_known_values(server: ServerProcess) -> tuple[str, list[bytes]]:
    """A table with a stream, a global secondary index, point-in-time recovery and KMS encryption asked for; items
    written, updated and deleted (the old images go to the stream and the recovery log); an on-demand backup; an
    IAM user's secret key. The table's name and the byte strings that must not be on disk in plaintext."""
    ddb = client(server, "dynamodb")
    name = unique_name(TABLE_MARKER)
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", SSESpecification={"Enabled": True},
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "email", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     GlobalSecondaryIndexes=[{"IndexName": "byEmail", "Projection": {"ProjectionType": "ALL"},
                                              "KeySchema": [{"AttributeName": "email", "KeyType": "HASH"}]}],
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    blob = secrets.token_bytes(24)
    ddb.put_item(TableName=name, Item={"pk": {"S": "PartitionKeyMarker7"}, "email": {"S": "IndexKeyMarker@x.example"},
                                       "note": {"S": "OldValueMarker"}, "data": {"B": blob}})
    ddb.update_item(TableName=name, Key={"pk": {"S": "PartitionKeyMarker7"}}, UpdateExpression="SET note = :n",
                    ExpressionAttributeValues={":n": {"S": "NewValueMarker"}})
    ddb.put_item(TableName=name, Item={"pk": {"S": "DeletedKeyMarker"}, "note": {"S": "DeletedValueMarker"}})
    ddb.delete_item(TableName=name, Key={"pk": {"S": "DeletedKeyMarker"}})
    wait_available(ddb, ddb.create_backup(TableName=name, BackupName="known")["BackupDetails"]["BackupArn"])
    iam = client(server, "iam")
    iam.create_user(UserName="EncryptedUserMarker")
    secret = iam.create_access_key(UserName="EncryptedUserMarker")["AccessKey"]["SecretAccessKey"]
    markers = [name, "PartitionKeyMarker7", "IndexKeyMarker@x.example", "OldValueMarker", "NewValueMarker",
               "DeletedKeyMarker", "DeletedValueMarker", "EncryptedUserMarker", secret]
    return name, [marker.encode() for marker in markers] + [base64.b64encode(blob)]  # (items are kept as JSON)


def found_on_disk(folder: Path, markers: list[bytes]) -> dict[str, list[bytes]]:
    """Each file under `folder` (WAL, shared-memory and side files, copies) that holds any marker, with those."""
    found: dict[str, list[bytes]] = {}
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits = [marker for marker in markers if marker in data]
            if hits:
                found[str(path.relative_to(folder))] = hits
    return found


def crash(server: ServerProcess) -> None:
    """kill -9 the whole server, its workers too, so that no process closes the store cleanly: its write-ahead log
    stays on disk, as after a power cut. (Killing the supervisor alone lets its workers stop gracefully, and the
    last to close the store checkpoints and removes the log.) The supervisor is stopped first, so it restarts no
    worker."""
    pid = server.process.pid
    os.kill(pid, signal.SIGSTOP)
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        workers = [int(child) for child in handle.read().split()]
    assert workers, "a server of two workers has worker processes"
    for worker in workers:
        os.kill(worker, signal.SIGKILL)
    server.stop(kill=True)
    assert server.process.returncode == -9


def test_a_plaintext_store_holds_the_known_values(tmp_path: Path) -> None:
    """Without a key, the search finds the markers (what the encrypted store's test looks for is really there)."""
    server = start(tmp_path / "data")
    try:
        _, markers = write_known_values(server)
        found = found_on_disk(tmp_path / "data", markers)
    finally:
        server.finish()
    assert set().union(*found.values()) == set(markers), found


def test_nothing_written_under_the_data_dir_is_readable(tmp_path: Path) -> None:
    data, key = tmp_path / "data", key_file(tmp_path)
    server = start(data, "--encryption-key-file", key)
    try:
        name, markers = write_known_values(server)
        assert found_on_disk(data, markers) == {}  # (while it runs: the write-ahead logs hold the latest writes)
        described = client(server, "dynamodb").describe_table(TableName=name)["Table"]
        assert described["SSEDescription"]["Status"] == "ENABLED"
        copied = openddb("backup", str(data / "copy"), "--data-dir", str(data), "--encryption-key-file", key)
        assert copied.returncode == 0, copied.stderr
        crash(server)
    finally:
        server.log.close()
    files = {path.name for path in data.rglob("*")}
    assert {"openddb.sqlite3-wal", "openddb-backups.sqlite3", "openddb.sqlite3"} <= files, files
    assert found_on_disk(data, markers) == {}
    again = start(data, "--encryption-key-file", key)
    try:
        ddb = client(again, "dynamodb")
        item = ddb.get_item(TableName=name, Key={"pk": {"S": "PartitionKeyMarker7"}}, ConsistentRead=True)["Item"]
        assert item["note"] == {"S": "NewValueMarker"}
        by_email = ddb.query(TableName=name, IndexName="byEmail", KeyConditionExpression="email = :e",
                             ExpressionAttributeValues={":e": {"S": "IndexKeyMarker@x.example"}})["Items"]
        assert [found["pk"]["S"] for found in by_email] == ["PartitionKeyMarker7"]
        (backup,) = ddb.list_backups(TableName=name)["BackupSummaries"]
        details = ddb.describe_backup(BackupArn=backup["BackupArn"])["BackupDescription"]
        assert details["SourceTableFeatureDetails"]["SSEDescription"]["Status"] == "ENABLED"
        restored = unique_name("restored")  # (the backups file attached to the store's connection, with the key)
        ddb.restore_table_from_backup(TargetTableName=restored, BackupArn=backup["BackupArn"])
        ddb.get_waiter("table_exists").wait(TableName=restored, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
        item = ddb.get_item(TableName=restored, Key={"pk": {"S": "PartitionKeyMarker7"}})["Item"]
        assert item["note"] == {"S": "NewValueMarker"}
    finally:
        again.finish()
    copy = start(data / "copy", "--encryption-key-file", key)
    try:
        item = client(copy, "dynamodb").get_item(TableName=name, Key={"pk": {"S": "PartitionKeyMarker7"}})["Item"]
        assert item["note"] == {"S": "NewValueMarker"}
    finally:
        copy.finish()


def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    """Every put acknowledged before a kill -9 in the middle of a stream of writes is there after a restart with
    the key (two workers: their commits, the checkpointer and the log all go through the codec)."""
    data, key = tmp_path / "data", key_file(tmp_path)
    server = ServerProcess(str(data), "--workers", "2", "--encryption-key-file", key)
    try:
        name = create_table(make_client(server.endpoint), range_type=None)
        failed: list[int] = []

        def write(ddb: Any, n: int) -> None:
            try:
                ddb.put_item(TableName=name, Item={"pk": {"S": f"k{n}"}, "v": {"S": "x" * 200}})
            except (BotoCoreError, ClientError):
                failed.append(n)  # (the server is gone: this call was not acknowledged)

        with writing(server.endpoint, write) as acknowledged:
            wait_for(acknowledged, 300)
            server.stop(kill=True)
        done = set(acknowledged) - set(failed)
    finally:
        server.log.close()
    again = ServerProcess(str(data), "--workers", "2", "--encryption-key-file", key, "--log-level", "info")
    try:
        ddb, found, page = make_client(again.endpoint), set(), {"TableName": name, "ConsistentRead": True}
        while True:
            answer = ddb.scan(**page)
            found |= {item["pk"]["S"] for item in answer["Items"]}
            if "LastEvaluatedKey" not in answer:
                break
            page["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        assert {f"k{n}" for n in done} <= found and len(done) >= 300
    finally:
        log = again.finish()
    assert f"(engine: sqlite, data: {data}, encrypted at rest)" in log


def refused(data_dir: Path | None, *args: str, **env: str) -> str:
    """`openddb serve` on `data_dir` (None: in memory) refuses to start: its one line."""
    store = ("--in-memory",) if data_dir is None else ("--data-dir", str(data_dir))
    done = openddb("serve", "--port", "0", "--log-level", "warning", *store, *args, **env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("openddb: "), done.stderr
    return lines[0]


@pytest.fixture
def encrypted(tmp_path: Path) -> tuple[Path, str]:
    """A stopped store encrypted with a key, holding one table with an item and an on-demand backup of it (so both
    of the store's files); its data dir and key file."""
    data, key = tmp_path / "data", key_file(tmp_path)
    server = ServerProcess(str(data), "--workers", "1", "--encryption-key-file", key)
    try:
        ddb = client(server, "dynamodb", "any", "any")
        ddb.create_table(TableName="kept", BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        ddb.put_item(TableName="kept", Item={"pk": {"S": "one"}})
        wait_available(ddb, ddb.create_backup(TableName="kept", BackupName="kept")["BackupDetails"]["BackupArn"])
    finally:
        server.finish()
    return data, key


def test_a_wrong_key_or_none_is_refused(encrypted: tuple[Path, str], tmp_path: Path) -> None:
    data, key = encrypted
    line = refused(data, "--encryption-key-file", key_file(tmp_path, "other"))
    assert line.startswith(f"openddb: cannot open the store in {data}: the encryption key does not open "
                           f"{data / 'openddb.sqlite3'}"), line
    line = refused(data)
    assert f"{data / 'openddb.sqlite3'} is encrypted (or is not a SQLite database): give its key" in line
    line = refused(data, OPENDDB_ENCRYPTION_KEY="not the key")
    assert "the encryption key does not open" in line
    assert "not the key" not in line  # (a key is never shown)
    line = refused(data, "--encryption-key-file", str(tmp_path / "missing"))
    assert line == f"openddb: cannot read the key file {tmp_path / 'missing'}: No such file or directory"
    (tmp_path / "empty").write_text("\n")
    assert refused(data, "--encryption-key-file", str(tmp_path / "empty")) == \
        f"openddb: the key file {tmp_path / 'empty'} is empty"
    assert "an encryption key is for the embedded store: PostgreSQL's data is encrypted at rest by its own means" \
        in refused(data, "--engine", "postgresql://me@127.0.0.1:1/db", "--encryption-key-file", key)
    copied = openddb("backup", str(tmp_path / "copy"), "--data-dir", str(data))  # (no key: refused)
    assert copied.returncode == 1 and "openddb.sqlite3 is encrypted (or is not a SQLite database)" in copied.stderr
    assert refused(None, "--encryption-key-file", key).endswith(
        "an --in-memory store writes none")


def test_a_plaintext_store_is_not_opened_with_a_key(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    server = ServerProcess(str(plain), "--workers", "1")
    try:
        assert client(server, "dynamodb", "any", "any").list_tables()["TableNames"] == []
    finally:
        server.finish()
    line = refused(plain, "--encryption-key-file", key_file(tmp_path))
    assert f"{plain / 'openddb.sqlite3'} is not encrypted: open it without a key, or encrypt it first" in line


def test_a_key_file_others_can_read_is_warned_of(encrypted: tuple[Path, str]) -> None:
    data, key = encrypted
    Path(key).chmod(0o644)
    server = ServerProcess(str(data), "--workers", "1", "--encryption-key-file", key)
    try:
        assert client(server, "dynamodb", "any", "any").list_tables()["TableNames"] == ["kept"]
    finally:
        log = server.finish()
    assert f"the key file {key} can be read by other users (mode 644): chmod 600 {key}" in log
    Path(key).chmod(0o600)
    server = ServerProcess(str(data), "--workers", "1", "--encryption-key-file", key)
    try:
        assert client(server, "dynamodb", "any", "any").list_tables()["TableNames"] == ["kept"]
    finally:
        assert "can be read by other users" not in server.finish()


def test_the_key_from_a_command_or_the_environment(encrypted: tuple[Path, str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    data, key = encrypted
    line = refused(data, "--encryption-key-command", "false")
    assert line == "openddb: the key command 'false' exited with code 1"
    server = ServerProcess(str(data), "--workers", "1", "--encryption-key-command", f"cat {key}")
    try:
        assert client(server, "dynamodb", "any", "any").list_tables()["TableNames"] == ["kept"]
    finally:
        server.finish()
    monkeypatch.setenv("OPENDDB_ENCRYPTION_KEY", Path(key).read_text().strip())
    server = ServerProcess(str(data), "--workers", "1")
    try:
        assert client(server, "dynamodb", "any", "any").list_tables()["TableNames"] == ["kept"]
    finally:
        server.finish()


def test_a_passphrase_is_a_key_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Text that is not 64 hex digits is a passphrase SQLCipher derives the key from (PBKDF2, a salt per file).
    data = tmp_path / "data"
    monkeypatch.setenv("OPENDDB_ENCRYPTION_KEY", "correct horse battery staple")
    for round_ in range(2):
        server = ServerProcess(str(data), "--workers", "1")
        try:
            ddb = client(server, "dynamodb", "any", "any")
            if round_ == 0:
                ddb.create_table(TableName="words", BillingMode="PAY_PER_REQUEST",
                                 AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                                 KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
                ddb.put_item(TableName="words", Item={"pk": {"S": "PassphraseMarker"}})
            assert ddb.get_item(TableName="words", Key={"pk": {"S": "PassphraseMarker"}})["Item"]
        finally:
            server.finish()
    assert found_on_disk(data, [b"PassphraseMarker"]) == {}
    assert "the encryption key does not open" in refused(data, OPENDDB_ENCRYPTION_KEY="correct horse battery")


def test_sqlcipher_missing_names_the_extra(tmp_path: Path) -> None:
    # As if the encryption extra was not installed: importing sqlcipher3 fails.
    code = "import sys; sys.modules['sqlcipher3'] = None; from openddb.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
                           "--encryption-key-file", key_file(tmp_path)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr == ("openddb: encryption at rest needs SQLCipher, which is not installed: "
                           "pip install 'openddb[encryption]'\n")


def test_rekey_rotates_the_key_and_turns_encryption_off_and_on(encrypted: tuple[Path, str], tmp_path: Path) -> None:
    data, old = encrypted
    new = key_file(tmp_path, "new")
    done = openddb("rekey", "--data-dir", str(data), "--encryption-key-file", old, "--new-key-file", new)
    assert (done.returncode, done.stdout) == (
        0, "openddb rekey: openddb.sqlite3, openddb-backups.sqlite3 encrypted with the new key\n"), done.stderr
    again = openddb("rekey", "--data-dir", str(data), "--encryption-key-file", old, "--new-key-file", new)
    assert again.stdout.startswith("openddb rekey: every file opens with the new key already")  # (resumable)
    assert "the encryption key does not open" in refused(data, "--encryption-key-file", old)
    assert openddb("rekey", "--data-dir", str(data), "--encryption-key-file", new, "--decrypt").returncode == 0
    assert (data / "openddb.sqlite3").read_bytes().startswith(b"SQLite format 3\0")
    assert openddb("rekey", "--data-dir", str(data), "--new-key-file", old).returncode == 0
    server = ServerProcess(str(data), "--workers", "1", "--encryption-key-file", old)
    try:
        ddb = client(server, "dynamodb", "any", "any")
        assert ddb.get_item(TableName="kept", Key={"pk": {"S": "one"}})["Item"] == {"pk": {"S": "one"}}
        assert [backup["BackupName"] for backup in ddb.list_backups()["BackupSummaries"]] == ["kept"]
        busy = openddb("rekey", "--data-dir", str(data), "--encryption-key-file", old, "--new-key-file", new)
        assert (busy.returncode, busy.stderr) == (1, f"openddb: a server has the store at {data} open: stop it "
                                                     "first\n")
    finally:
        server.finish()


def test_the_advisor_counts_an_encrypted_store_as_checked(encrypted: tuple[Path, str]) -> None:
    # (on a plaintext store the rule is "not checked": tests/api/test_advisor.py)
    data, key = encrypted
    server = ServerProcess(str(data), "--workers", "1", "--advisor", "on", "--encryption-key-file", key)
    try:
        client(server, "dynamodb", "any", "any").put_item(TableName="kept", Item={"pk": {"S": "a"}})
        with urllib.request.urlopen(server.endpoint + "/openddb/advisor?table=kept") as answer:
            report = json.loads(answer.read())
        assert "encryption-off" not in {entry["rule"] for entry in report["not_checked"]}
        assert report["not_checked"], report  # (other rules are still listed: the list is the one looked at)
    finally:
        server.finish()
