"""Servers for the benchmark programs: started on a free loopback port, timed to their first answer, measured
idle, always stopped; the peers (moto from PyPI, dynalite from npm) installed on demand."""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS_DIR = ROOT / "benchmarks" / ".peers"
PING = b'{"Limit":1}'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answered(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        connection.request("POST", "/", body=PING, headers={
            "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.ListTables",
            "Authorization": "AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/dynamodb/aws4_request, "
                             "SignedHeaders=host, Signature=0"})
        connection.getresponse().read()
        connection.close()
        return True
    except OSError:
        return False


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children, in MB."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for each in pids:
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


class Server:
    def __init__(self, name: str, args: list[str], port: int) -> None:
        self.name, self.port = name, port
        started = time.perf_counter()
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not answered(port):
            if self.process.poll() is not None or time.perf_counter() - started > 60:
                raise RuntimeError(f"{name} did not start: {' '.join(args)}")
            time.sleep(0.005)
        self.startup_s = time.perf_counter() - started
        time.sleep(1.0)
        self.idle_rss_mb = rss_mb(self.process.pid)

    @property
    def spec(self) -> str:
        return f"{self.name}=http://127.0.0.1:{self.port}@{self.process.pid}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def ensure_peers(peers: list[str]) -> None:
    if "moto" in peers and shutil.which("moto_server") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "moto[server]"], check=True)
    if "dynalite" in peers and not (PEERS_DIR / "node_modules" / "dynalite").exists():
        PEERS_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--prefix", str(PEERS_DIR), "dynalite"], check=True)
