"""The embedded store's encryption key (encryption at rest, see sqlite_cipher): where it comes from.

A key comes from a provider: a file (`--encryption-key-file`), an environment variable (`OPENDDB_ENCRYPTION_KEY`),
a command that prints it (`--encryption-key-command`: a secrets manager's or KMS's client), or, through the Python
API, any object with the `KeyProvider` methods. Its text is either 64 hexadecimal digits, taken as the 256-bit key
itself (`openssl rand -hex 32` makes one; opening a connection then costs nothing more), or a passphrase, from
which SQLCipher derives the key with PBKDF2-HMAC-SHA512 (256,000 iterations, a salt of each file's own), at about
0.1 s for every connection opened.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from typing import Protocol

KEY_VARIABLE = "OPENDDB_ENCRYPTION_KEY"
_RAW_KEY = re.compile(r"[0-9a-fA-F]{64}")
_COMMAND_SECONDS = 30.0


class KeyUnavailable(Exception):
    """The key cannot be had from its provider: the message says which and why, for the command line."""


class KeyProvider(Protocol):
    """Hands over the store's key: `secret()` the key's text, `source` what it comes from (for messages; never the
    key itself)."""

    @property
    def source(self) -> str: ...

    def secret(self) -> str: ...


@dataclass(frozen=True)
class KeyFile:
    """The key is the text of a file (a trailing newline is not part of it)."""

    path: str

    @property
    def source(self) -> str:
        return f"the key file {self.path}"

    def secret(self) -> str:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise KeyUnavailable(f"cannot read {self.source}: {error.strerror or error}") from None
        return _text(data, self.source)


@dataclass(frozen=True)
class KeyVariable:
    """The key is the value of an environment variable."""

    name: str = KEY_VARIABLE

    @property
    def source(self) -> str:
        return f"${self.name}"

    def secret(self) -> str:
        value = os.environ.get(self.name)
        if value is None:
            raise KeyUnavailable(f"{self.source} is not set")
        return _text(value.encode(), self.source)


@dataclass(frozen=True)
class KeyCommand:
    """The key is what a command prints on its standard output (run without a shell; it must exit 0)."""

    command: str

    @property
    def source(self) -> str:
        return f"the key command {self.command!r}"

    def secret(self) -> str:
        try:
            done = subprocess.run(shlex.split(self.command), capture_output=True, timeout=_COMMAND_SECONDS,
                                  check=False)
        except (OSError, ValueError, subprocess.TimeoutExpired) as error:
            raise KeyUnavailable(f"cannot run {self.source}: {error}") from None
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            raise KeyUnavailable(f"{self.source} exited with code {done.returncode}"
                                 + (f": {said[-1]}" if said else ""))
        return _text(done.stdout, self.source)


def _text(data: bytes, source: str) -> str:
    """The key's text from what its provider gave: UTF-8, trailing line ends and spaces left out, not empty."""
    try:
        text = data.decode().rstrip("\r\n \t")
    except UnicodeDecodeError:
        raise KeyUnavailable(f"{source} is not text: give the key as 64 hexadecimal digits or a passphrase") \
            from None
    if not text:
        raise KeyUnavailable(f"{source} is empty")
    if "\0" in text:
        raise KeyUnavailable(f"{source} holds a NUL character")
    return text


@dataclass(frozen=True)
class StoreKey:
    """A store's key, as SQLCipher takes it (`PRAGMA key`, `ATTACH ... KEY`): a raw key as `x'<64 hex digits>'`,
    anything else as a passphrase. Its repr never shows it."""

    value: str = field(repr=False)

    @classmethod
    def of(cls, provider: KeyProvider) -> StoreKey:
        secret = provider.secret()
        return cls(f"x'{secret.lower()}'" if _RAW_KEY.fullmatch(secret) else secret)

    def literal(self) -> str:
        """The key as an SQL string literal (PRAGMA takes no parameters)."""
        return "'" + self.value.replace("'", "''") + "'"
