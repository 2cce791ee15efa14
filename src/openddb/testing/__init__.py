"""Testing with OpenDDB: an in-process server (`openddb.testing.server()`) and a pytest plugin
(`openddb.testing.plugin`, loaded by pytest through the `openddb` entry point). See docs/TESTING.md."""

from __future__ import annotations

from openddb.testing.server import Server, server

__all__ = ["Server", "server"]
