"""The Python examples of the user docs run as written: each page's ```python blocks, in order, in one namespace,
against a fresh `openddb serve --dev --in-memory` (the endpoint the docs name, http://127.0.0.1:8000, replaced by
the test server's). A block that fails fails the test with the page and the block's first line. Blocks marked
```py (a pytest file, a receiver for a trigger) are shown, not run: they need a process set up differently."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ServerProcess

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"
PAGES = ["GETTING-STARTED.md", "INDEXES.md", "TRANSACTIONS.md", "TTL.md", "STREAMS.md", "FROM-MOTO.md", "VECTORS.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
DOCS_ENDPOINT = "http://127.0.0.1:8000"


def examples(page: str) -> list[str]:
    return BLOCK.findall((DOCS / page).read_text())


@pytest.fixture
def dev_server() -> Iterator[ServerProcess]:
    """A server of the page's own: the examples use fixed table names, and the TTL page moves the clock."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENDDB_TEST_ENGINE", raising=False)
        process = ServerProcess(None, "--dev")
    try:
        yield process
    finally:
        process.finish()


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page: str, dev_server: ServerProcess) -> None:
    blocks = examples(page)
    assert blocks, f"{page} has no Python example"
    namespace: dict[str, object] = {"__name__": f"docs_{page}"}
    for block in blocks:
        source = block.replace(DOCS_ENDPOINT, dev_server.endpoint)
        try:
            exec(compile(source, page, "exec"), namespace)  # the docs' own examples
        except Exception as error:
            raise AssertionError(f"{page}: the block starting {block.splitlines()[0]!r} failed: {error!r}") from error
