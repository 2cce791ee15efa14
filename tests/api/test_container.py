"""The container image's definition, run as the image runs it: the Dockerfile's ENV, ENTRYPOINT and CMD (with a
DynamoDB Local command line appended, as a compose file's `command:` does) serve on every interface, keep the
store in the data volume, stop cleanly on `docker stop`'s SIGTERM, and its HEALTHCHECK passes without a signature.
(This machine cannot build images; the build itself is not tested here.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port, make_client

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="the embedded engine's image")

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"
USERS = {"TableName": "users", "BillingMode": "PAY_PER_REQUEST",
         "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
         "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}]}


def instructions() -> dict[str, list[str]]:
    """Each instruction of the Dockerfile (continuation lines joined) to its arguments, in order."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            found.setdefault(keyword, []).append(rest.strip())
    return found


def exec_form(text: str) -> list[str]:
    """An instruction's JSON (exec) form, with `openddb` run as this interpreter's module."""
    argv = json.loads(text)
    assert isinstance(argv, list)
    return [sys.executable, "-m", "openddb", *argv[1:]] if argv and argv[0] == "openddb" else argv


def image_environment(data_dir: Path, port: int) -> dict[str, str]:
    environment = dict(os.environ)
    for declaration in instructions()["ENV"]:
        environment.update(dict(item.split("=", 1) for item in shlex.split(declaration)))
    assert environment["OPENDDB_DATA_DIR"] == "/data"  # the volume
    environment.update(OPENDDB_DATA_DIR=str(data_dir), OPENDDB_PORT=str(port))  # (-e OPENDDB_PORT=... moves it)
    return environment


def healthy(environment: dict[str, str]) -> bool:
    command = instructions()["HEALTHCHECK"][0].partition(" CMD ")[2]
    return subprocess.run(exec_form(command), env=environment, capture_output=True, timeout=30).returncode == 0


@dataclass
class Container:
    """A running image's process and the file its stderr (`docker logs`) goes to."""

    process: subprocess.Popen[bytes]
    log: Path

    def logged(self) -> str:
        return self.log.read_text(errors="replace")


def run_image(environment: dict[str, str], workdir: Path, *command: str) -> Container:
    """Start the container's process: ENTRYPOINT, then `command` (a compose file's) or else CMD; wait for the
    health check to pass."""
    entrypoint = exec_form(instructions()["ENTRYPOINT"][0])
    arguments = list(command) if command else json.loads(instructions()["CMD"][0])
    log = workdir / f"container-{time.monotonic_ns()}.log"
    with log.open("wb") as errors:
        process = subprocess.Popen([*entrypoint, *arguments], env=environment, cwd=workdir, stderr=errors)
    container = Container(process, log)
    deadline = time.monotonic() + 20
    while not healthy(environment):
        assert process.poll() is None and time.monotonic() < deadline, container.logged()
        time.sleep(0.1)
    return container


def wait_for_log(container: Container, text: str) -> None:
    """Until `text` is in the container's log (a worker other than the one that logs it may answer first)."""
    deadline = time.monotonic() + 20
    while text not in container.logged():
        assert container.process.poll() is None and time.monotonic() < deadline, container.logged()
        time.sleep(0.1)


def stop(container: Container) -> str:
    """As `docker stop` does: SIGTERM, then it must exit on its own, successfully."""
    container.process.terminate()
    container.process.wait(timeout=20)
    errors = container.logged()
    assert container.process.returncode == 0, errors
    assert "Traceback" not in errors
    return errors


def test_the_definition_is_small_non_root_and_declares_its_volume_and_port() -> None:
    found = instructions()
    assert found["FROM"][0].startswith("python:") and "slim" in found["FROM"][0]
    assert found["USER"] == ["openddb"]
    assert found["VOLUME"] == ['["/data"]']
    assert found["EXPOSE"] == ["8000"]
    assert exec_form(found["ENTRYPOINT"][0])[-1] == "serve"


def test_the_default_command_serves_every_interface_from_the_volume(tmp_path: Path) -> None:
    port = free_port()
    environment = image_environment(tmp_path / "volume", port)
    container = run_image(environment, tmp_path)
    try:
        make_client(f"http://127.0.0.1:{port}").create_table(**USERS)
        wait_for_log(container, f"listening on http://0.0.0.0:{port}")
    finally:
        stop(container)
    assert not healthy(environment)  # nothing answers any more
    container = run_image(environment, tmp_path)  # a new container on the same volume
    try:
        assert make_client(f"http://127.0.0.1:{port}").list_tables()["TableNames"] == ["users"]
    finally:
        stop(container)


def test_a_dynamodb_local_compose_command_runs_unchanged(tmp_path: Path) -> None:
    # command: "-jar DynamoDBLocal.jar -sharedDb -dbPath ./data", relative to the image's working directory.
    port = free_port()
    environment = image_environment(tmp_path / "volume", port)
    (tmp_path / "data").mkdir()
    container = run_image(environment, tmp_path, "-jar", "DynamoDBLocal.jar", "-sharedDb", "-dbPath", "./data")
    try:
        make_client(f"http://127.0.0.1:{port}").create_table(**USERS)
    finally:
        stop(container)
    assert (tmp_path / "data" / "openddb.sqlite3").exists()
    assert not (tmp_path / "volume").exists()
