"""Start-up mistakes end in one line (`openddb: ...`) and exit code 2, before anything is served: a busy port
(another server's workers included), a bad data dir, a port out of range, PostgreSQL without its driver or out
of reach. A server's own workers still share its port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openddb.server.listen import _listening_inodes
from tests.conftest import ServerProcess, free_port, make_client

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="the embedded engine's start-up")


def serve(*args: str, prefix: tuple[str, ...] = (), code: str | None = None) -> str:
    """Run `openddb serve ARGS` (after `prefix`, or through `code` instead of the module), expect it to refuse to
    start with exit code 2, and return its one line."""
    command = [*prefix, sys.executable]
    command += ["-c", code] if code else ["-m", "openddb"]
    done = subprocess.run([*command, "serve", "--log-level", "warning", *args], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("openddb: "), done.stderr
    return lines[0]


@pytest.fixture
def workers(tmp_path: Path):  # type: ignore[no-untyped-def]
    process = ServerProcess(str(tmp_path / "first"), "--workers", "2")
    yield process
    process.finish()


def test_a_second_server_on_the_port_of_one_with_workers_fails_at_once(workers: ServerProcess, tmp_path: Path) -> None:
    # The bug: both servers' workers joined one SO_REUSEPORT group and the kernel split clients between two stores.
    for args in (["--workers", "2", "--data-dir", str(tmp_path / "second")], ["--in-memory"]):
        line = serve("--port", str(workers.port), *args)
        assert f"port {workers.port} on 127.0.0.1 is already in use by another openddb server" in line
        assert str(tmp_path / "first") in line  # the other server's store, from its command line
    assert not (tmp_path / "second").exists()  # refused before it made a store
    line = serve("--host", "0.0.0.0", "--port", str(workers.port), "--in-memory")
    assert f"port {workers.port} on 0.0.0.0 is already in use" in line


def test_the_workers_of_one_server_still_share_its_port(workers: ServerProcess) -> None:
    # The port has one listening socket, the server's, which both workers hold (inherited across the fork) and
    # accept from (server/balance.py).
    deadline = time.monotonic() + 10
    while len(_holders(workers.process.pid, workers.port)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(_listening_inodes(workers.port)) == 1
    assert len(_holders(workers.process.pid, workers.port)) == 2
    for _ in range(4):
        assert make_client(workers.endpoint).list_tables()["TableNames"] == []


def _holders(supervisor: int, port: int) -> list[int]:
    """The supervisor's child processes that hold the port's listening socket open."""
    links = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    with open(f"/proc/{supervisor}/task/{supervisor}/children") as handle:
        children = [int(pid) for pid in handle.read().split()]
    holders = []
    for pid in children:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        if any(_link(f"/proc/{pid}/fd/{fd}") in links for fd in fds):
            holders.append(pid)
    return holders


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def test_a_port_held_by_another_program_is_refused_naming_it() -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        line = serve("--port", str(port), "--in-memory", "--workers", "1")
        # A mistyped --engine is the mistake named, not the busy port (the user would fix the port, then meet it).
        engine = serve("--port", str(port), "--engine", "mysql://localhost/db")
    assert f"port {port} on 127.0.0.1 is already in use by pid {os.getpid()}" in line
    assert "unsupported --engine 'mysql://localhost/db'" in engine


@pytest.mark.parametrize(("args", "expected"), [
    (["--port", "99999"], "--port 99999 is out of range: a port is 0 to 65535"),
    (["--port", "-1"], "--port -1 is out of range"),
    (["--workers", "0"], "--workers 0: at least 1"),
    (["--engine", "mysql://localhost/db"], "unsupported --engine 'mysql://localhost/db'"),
    (["--auth", "verify", "--root-credentials", "AKIDX:secret@12345"],
     "--root-credentials AKIDX:...: ACCESS_KEY:SECRET[@ACCOUNT], ACCOUNT 12 digits"),
    (["--auth", "verify", "--root-credentials", "AKIDX:secret", "--root-credentials", "AKIDX:other@111111111111"],
     "--root-credentials AKIDX: given twice"),
])
def test_bad_options(args: list[str], expected: str) -> None:
    # (--port 0: a mistake found after the port is checked must not meet a server the user left on port 8000)
    assert expected in serve("--in-memory", "--port", "0", *args)


def test_a_data_dir_that_is_a_file_or_under_one(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert serve("--port", "0", "--data-dir", str(tmp_path / "file")) == \
        f"openddb: the data dir {tmp_path / 'file'} is a file, not a directory"
    assert serve("--port", "0", "--data-dir", str(tmp_path / "file" / "data")) == \
        f"openddb: cannot create the data dir {tmp_path / 'file' / 'data'}: a part of the path is a file"


def _without_override() -> tuple[str, ...]:
    """Run as this user without the power to ignore file permissions (root has it)."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file permissions cannot be made to apply")
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search",
            "--inh-caps=-dac_override,-dac_read_search")


def test_an_unwritable_data_dir(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        line = serve("--port", "0", "--data-dir", str(locked), prefix=_without_override())
        assert line == f"openddb: the data dir {locked} is not writable: Permission denied"
        line = serve("--port", "0", "--data-dir", str(locked / "data"), prefix=_without_override())
        assert line == f"openddb: cannot create the data dir {locked / 'data'}: Permission denied"
    finally:
        locked.chmod(0o700)


def test_a_data_dir_on_a_read_only_file_system(tmp_path: Path) -> None:
    # A private mount namespace: the read-only mount exists for the server's process alone.
    mount = tmp_path / "ro"
    mount.mkdir()
    probe = subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(mount)],
                           capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot make a read-only mount here (needs unshare and mount privileges)")
    script = f'mount -t tmpfs -o ro tmpfs {mount} && exec "$@"'
    line = serve("--port", "0", "--data-dir", str(mount), prefix=("unshare", "-m", "sh", "-c", script, "sh"))
    assert line == f"openddb: the data dir {mount} is not writable: Read-only file system"


def test_postgresql_without_its_driver_names_the_install_command() -> None:
    # As if the postgres extra was not installed: importing psycopg fails.
    code = "import sys; sys.modules['psycopg'] = None; from openddb.cli import main; sys.exit(main(sys.argv[1:]))"
    line = serve("--port", "0", "--engine", "postgresql://me@127.0.0.1:5432/db", code=code)
    assert "--engine postgresql:// needs the PostgreSQL driver, which is not installed" in line
    assert "pip install 'psycopg[binary]>=3.1'" in line


def test_postgresql_out_of_reach_names_the_url_without_its_password() -> None:
    url = f"postgresql://me:secret@127.0.0.1:{free_port()}/db"
    line = serve("--port", "0", "--engine", url)
    assert line.startswith(f"openddb: cannot open the engine postgresql://me:***@127.0.0.1:{url.rsplit(':', 1)[1]}")
    assert "Connection refused" in line
    assert "secret" not in line
