"""The command line's side of encryption at rest (the embedded store's, see storage/sqlite_cipher): where the key
comes from, for `openddb serve`, `backup` and `restore`, and `openddb rekey`, which rotates it (or encrypts a
plaintext store, or decrypts one)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from openddb.startup import StartupError, add_data_dir_option
from openddb.storage.sqlite_cipher import EncryptionUnavailable, StoreKeyRefused, driver
from openddb.storage.sqlite_copy import StoreCopyError, rekey_store
from openddb.storage.store_keys import (
    KEY_VARIABLE,
    KeyCommand,
    KeyFile,
    KeyProvider,
    KeyUnavailable,
    KeyVariable,
    StoreKey,
)

FILE_VARIABLE = "OPENDDB_ENCRYPTION_KEY_FILE"
log = logging.getLogger("openddb")


def add_key_options(parser: argparse.ArgumentParser) -> None:
    """--encryption-key-file and --encryption-key-command (else $OPENDDB_ENCRYPTION_KEY_FILE, else
    $OPENDDB_ENCRYPTION_KEY, the key itself); none of them: the store is plaintext."""
    keys = parser.add_argument_group("encryption at rest (the embedded store; needs pip install "
                                     "'openddb[encryption]', see docs/ENCRYPTION.md)")
    given = keys.add_mutually_exclusive_group()
    given.add_argument("--encryption-key-file", metavar="FILE", default=os.environ.get(FILE_VARIABLE),
                       help="encrypt every file of the data dir with the key in FILE: 64 hex digits (`openssl rand "
                            f"-hex 32`) or a passphrase (default: ${FILE_VARIABLE}, else the key in ${KEY_VARIABLE}; "
                            "none: not encrypted)")
    given.add_argument("--encryption-key-command", metavar="COMMAND",
                       help="as --encryption-key-file, the key being what COMMAND prints (a secrets manager's or "
                            "KMS's client; run without a shell)")


def key_provider(args: argparse.Namespace) -> KeyProvider | None:
    """Where the options say the store's key comes from (None: the store is not encrypted)."""
    if args.encryption_key_command:
        return KeyCommand(args.encryption_key_command)
    if args.encryption_key_file:
        return KeyFile(args.encryption_key_file)
    if os.environ.get(KEY_VARIABLE):
        return KeyVariable(KEY_VARIABLE)
    return None


def store_key(args: argparse.Namespace) -> StoreKey | None:
    """The store's key the options give (None: none); StartupError if it cannot be had."""
    provider = key_provider(args)
    if provider is None:
        return None
    try:
        key = StoreKey.of(provider)
    except KeyUnavailable as error:
        raise StartupError(str(error)) from None
    if isinstance(provider, KeyFile):
        _warn_if_shared(provider.path)
    return key


def _warn_if_shared(path: str) -> None:
    """A key file other users can read is as good as a plaintext store to them: said once at start (as ssh says of
    a private key's mode), not refused, since the file's owner decides."""
    mode = os.stat(path).st_mode & 0o777
    if mode & 0o077:
        log.warning("the key file %s can be read by other users (mode %03o): chmod 600 %s", path, mode, path)


def add_rekey_parser(commands: Any) -> None:
    rekey = commands.add_parser("rekey", help="write the stopped embedded store again under a new encryption key "
                                              "(key rotation), or encrypt a plaintext store, or decrypt one")
    add_data_dir_option(rekey)
    add_key_options(rekey)
    new = rekey.add_argument_group("the new key").add_mutually_exclusive_group(required=True)
    new.add_argument("--new-key-file", metavar="FILE", help="the new key is in FILE")
    new.add_argument("--new-key-command", metavar="COMMAND", help="the new key is what COMMAND prints")
    new.add_argument("--decrypt", action="store_true", help="no new key: the store is written in plaintext")


def rekey(args: argparse.Namespace) -> int:
    """`openddb rekey`: the current key from the usual options (none: the store is plaintext), the new one from
    --new-key-file, --new-key-command or --decrypt."""
    try:
        errors = driver(None, cipher=True).error  # (SQLCipher does the work, whichever way)
    except EncryptionUnavailable as error:
        print(f"openddb: {error}", file=sys.stderr)
        return 1
    try:
        old = store_key(args)
        provider = KeyFile(args.new_key_file) if args.new_key_file else \
            KeyCommand(args.new_key_command) if args.new_key_command else None
        new = None if provider is None else StoreKey.of(provider)
        if old is None and new is None:
            raise StartupError("--decrypt: the store has no key to take off (give its key with "
                               "--encryption-key-file or the other key options)")
        rewritten = rekey_store(args.data_dir, old, new)
    except (StartupError, KeyUnavailable, StoreKeyRefused, StoreCopyError, errors, OSError) as error:
        print(f"openddb: {error}", file=sys.stderr)
        return 1
    what = "decrypted" if new is None else "encrypted with the new key"
    print(f"openddb rekey: {', '.join(rewritten)} {what}" if rewritten else
          f"openddb rekey: every file opens with the new key already ({what})")
    return 0
