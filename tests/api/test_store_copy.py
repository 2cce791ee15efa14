"""`openddb backup PATH` and `openddb restore PATH`: a consistent copy of a whole embedded store while its server
runs and writes, and the store put back from it (with its on-demand backups)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from tests.api.writers import writing
from tests.conftest import ServerProcess, create_table, make_client

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")),
                                reason="copies the embedded store (a shared engine has its own backups)")


def openddb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openddb", *args], capture_output=True, text=True, timeout=60)


def keys(ddb, name: str) -> set[str]:  # type: ignore[no-untyped-def]
    found: set[str] = set()
    page = {"TableName": name}
    while True:
        answer = ddb.scan(**page)
        found |= {item["pk"]["S"] for item in answer["Items"]}
        if "LastEvaluatedKey" not in answer:
            return found
        page["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


def test_backup_while_writing_and_restore(tmp_path):
    data, copy, restored = str(tmp_path / "data"), str(tmp_path / "copy"), str(tmp_path / "restored")
    server = ServerProcess(data)
    ddb = make_client(server.endpoint)
    try:
        name = create_table(ddb, range_type=None)
        def write(client: Any, n: int) -> None:
            client.put_item(TableName=name, Item={"pk": {"S": f"k{n}"}})

        with writing(server.endpoint, write) as acknowledged:
            arn = ddb.create_backup(TableName=name, BackupName="kept")["BackupDetails"]["BackupArn"]
            before = acknowledged[-1]
            done = openddb("backup", copy, "--data-dir", data)
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "openddb backup: openddb.sqlite3, openddb-backups.sqlite3"
        refused = openddb("restore", copy, "--data-dir", data)  # (its server is running)
        assert refused.returncode == 1 and "stop it first" in refused.stderr
        again = openddb("backup", copy, "--data-dir", data)
        assert again.returncode == 1 and "already holds a store" in again.stderr
    finally:
        server.finish()
    done = openddb("restore", copy, "--data-dir", restored)
    assert done.returncode == 0, done.stderr
    server = ServerProcess(restored)
    ddb = make_client(server.endpoint)
    try:
        found = keys(ddb, name)
        assert {f"k{n}" for n in range(1, before + 1)} <= found  # every write acknowledged before the copy began
        assert found <= {f"k{n}" for n in acknowledged}
        assert [b["BackupArn"] for b in ddb.list_backups(TableName=name)["BackupSummaries"]] == [arn]
    finally:
        server.finish()
