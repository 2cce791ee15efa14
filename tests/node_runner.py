"""Running the JavaScript programs of tests/node (the AWS SDK for JavaScript v3) against a server: each prints one
JSON object on stdout, which the Python test checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"

# Skips without node or without the SDK; CI (.ci/run) installs the SDK with `npm ci`, so there they run.
needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_DIR / "node_modules").is_dir(),
    reason="needs node on PATH and the JavaScript SDK: run `npm ci --prefix tests/node`")


def run_node(script: str, *args: str) -> dict[str, Any]:
    """What tests/node/`script` prints when run with `args`; its stderr (the JavaScript stack) in the failure
    message if it fails. The AWS_ variables of the environment are left out: the scripts set what they need."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    # The SDK's notice that later releases need Node 22 is noise on stderr, which a failure message shows.
    env["AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED"] = "true"
    done = subprocess.run(["node", str(NODE_DIR / script), *args], capture_output=True, text=True, timeout=120,
                          env=env, check=False)
    assert done.returncode == 0, f"{script} {' '.join(args)} failed:\n{done.stderr}\n{done.stdout}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result
