"""Command line: `openddb serve` wires configuration -> engine -> server."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import shutil
import signal
import socket
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from openddb import __version__
from openddb.advisor import command as advise_command
from openddb.advisor.settings import Settings, SettingsError, load
from openddb.api import quotas
from openddb.api.fault_injection import FaultInjector, SpecError, parse_spec
from openddb.api.partition_sizes import DEFAULT_PARTITION_BYTES
from openddb.api.partition_splits import DEFAULT_HEAT_SECONDS
from openddb.api.shared_buckets import SharedBuckets, create_buckets
from openddb.api.throttle import Throttle
from openddb.api.throttle_exchange import DrawExchange, Node
from openddb.console.pages import Console
from openddb.encryption import add_key_options, add_rekey_parser, rekey, store_key
from openddb.identity.audit import AuditLog
from openddb.identity.sigv4 import Credentials, Verifier
from openddb.identity.store import DEFAULT_ACCOUNT
from openddb.observe.metrics import Metrics
from openddb.server.balance import Shares
from openddb.server.connection_limits import ConnectionLimits, raise_file_limit
from openddb.server.listen import endpoint_of
from openddb.server.requests_log import LOG_FORMAT
from openddb.server.tls import TlsSetupError, server_context
from openddb.server.workers import share_directory, stop_with_parent, supervise
from openddb.startup import (
    StartupError,
    add_data_dir_option,
    bind,
    check_engine_urls,
    check_port,
    open_postgres,
    open_sqlite,
    remove_sqlite_store,
)
from openddb.storage.base import Engine, StreamSettings
from openddb.storage.sqlite_cipher import EncryptionUnavailable, StoreKeyRefused, driver
from openddb.storage.sqlite_copy import StoreCopyError, backup_store, restore_store

if TYPE_CHECKING:
    from openddb.advisor.listener import Advisor
    from openddb.api.dispatch import Dispatcher
    from openddb.server.control import Control
    from openddb.streams.triggers import TriggerConfig

log = logging.getLogger("openddb")
_STREAM_DEFAULTS = StreamSettings()
# How long --delay-transient-statuses (and DynamoDB Local's -delayTransientStatuses, which takes no value) holds a
# transient status when no SECONDS is given: DynamoDB Local documents no duration, and AWS takes from seconds to
# minutes; 2 s makes waiting code wait without slowing a test suite much (see docs/TESTING.md).
TRANSIENT_SECONDS = 2.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openddb", description="A DynamoDB-compatible database server.")
    parser.add_argument("--version", action="version", version=f"openddb {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the server", epilog=_LOCAL_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--host", default=os.environ.get("OPENDDB_HOST", "127.0.0.1"),
                       help="address to listen on (default: $OPENDDB_HOST, else 127.0.0.1)")
    serve.add_argument("--port", "-port", type=int, default=os.environ.get("OPENDDB_PORT", "8000"),
                       help="port to listen on (default: $OPENDDB_PORT, else 8000)")
    _store_options(serve)
    _log_and_page_options(serve)
    serve.add_argument("--wording", choices=("2026", "2025"), default=None,
                       help="the words of refusals DynamoDB changed region by region in 2026: 2026 (the default, most "
                            "regions) or 2025 (the earlier words; the same as OPENDDB_WORDING=2025, see "
                            "docs/OPERATIONS.md)")
    serve.add_argument("--dev", action="store_true", default=os.environ.get("OPENDDB_DEV") == "1",
                       help="a server for tests: the test-control endpoints under /openddb/ (empty the store, move "
                            "the clock, sweep TTL now; no signature needed) and one process (default: "
                            "$OPENDDB_DEV=1, else off)")
    serve.add_argument("--delay-transient-statuses", "-delayTransientStatuses", type=_seconds, nargs="?",
                       const=TRANSIENT_SECONDS, default=None, metavar="SECONDS", dest="delay_transient_statuses",
                       help="tables and indexes stay CREATING, UPDATING or DELETING for SECONDS after each change, "
                            "as on DynamoDB (default without the option: none; without SECONDS: "
                            f"{TRANSIENT_SECONDS:g}; see docs/TESTING.md)")
    _local_flags(serve)
    _stream_options(serve)
    _connection_options(serve)
    _auth_options(serve)
    _observation_options(serve)
    _quota_options(serve)
    _tail_parser(commands)
    advise_command.add_parser(commands)
    health_parser = commands.add_parser("health", help="check that a server answers (exit 0) or not (exit 1), as a "
                                                       "container health check")
    health_parser.add_argument("--endpoint", default=None, metavar="URL",
                               help="the server (default: http://127.0.0.1:$OPENDDB_PORT, else port 8000)")
    health_parser.add_argument("--ca", default=None, metavar="FILE",
                               help="for an https:// endpoint: the certificate authority to trust (openddb-ca.pem)")
    _cert_parser(commands)
    _store_copy_parser(commands)
    add_rekey_parser(commands)
    return parser


def _store_options(serve: argparse.ArgumentParser) -> None:
    """Where the data lives: the embedded store or PostgreSQL (and its replicas), workers, durability."""
    store = serve.add_mutually_exclusive_group()
    add_data_dir_option(store, "-dbPath", what="directory of the durable store")
    store.add_argument("--in-memory", "-inMemory", action="store_true",
                       help="keep everything in memory (lost at exit)")
    serve.add_argument("--engine", default=os.environ.get("OPENDDB_ENGINE"), metavar="URL",
                       help="a shared database instead of the embedded store: postgresql://user@host:port/db "
                            "(default: $OPENDDB_ENGINE, else the embedded SQLite store)")
    serve.add_argument("--engine-replica", action="append", default=[], metavar="URL", dest="engine_replicas",
                       help="a streaming replica of --engine's PostgreSQL (repeatable): eventually consistent "
                            "GetItem, Query, Scan and BatchGetItem may be answered from it")
    serve.add_argument("--replica-max-lag", type=float, default=1.0, metavar="SECONDS",
                       help="a replica further behind the primary than this is skipped (default 1)")
    serve.add_argument("--workers", type=int, default=None, metavar="N",
                       help="server processes sharing the port (default: one per CPU core; 1 with --in-memory)")
    serve.add_argument("--sync", choices=("normal", "full"), default="normal",
                       help="normal: durable across a crash of the server; full: fsync each commit")
    serve.add_argument("--disk-reserve-mb", type=int, default=32, metavar="MB",
                       help="disk space the embedded store holds in reserve and gives up when the disk fills, so it "
                            "can checkpoint and recover once there is room (default 32; 0: none)")
    add_key_options(serve)


def _log_and_page_options(serve: argparse.ArgumentParser) -> None:
    """The request log, and what a browser page may reach: CORS and the console."""
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                       help="info (the default) logs a line per request; warning: start-up problems and errors")
    serve.add_argument("--log-format", default="text", choices=("text", "json"),
                       help="the request log's lines: text (the default) or one JSON object a line")
    serve.add_argument("--cors", "-cors", default="*", metavar="ORIGINS",
                       help="origins allowed to call from a browser page, comma-separated, as DynamoDB Local's -cors "
                            "(default *: any origin)")
    serve.add_argument("--console", choices=("on", "off"), default=os.environ.get("OPENDDB_CONSOLE", "on"),
                       help="the web console at /console (default on: static pages whose every action is an API call "
                            "signed in the browser, so it reaches nothing a client could not; see docs/CONSOLE.md)")


def _observation_options(serve: argparse.ArgumentParser) -> None:
    """Testing retries and limits, and watching the requests: injected errors, throttling, the advisor."""
    serve.add_argument("--inject-errors", action="append", default=[], metavar="SPEC",
                       help="refuse a fraction of calls to test retries: RATE[:KIND,...][@TARGET,...], KIND throttle "
                            "(default), internal or unavailable, TARGET an operation or a table (repeatable; see "
                            "docs/TESTING.md)")
    serve.add_argument("--throttling", choices=("on", "off"), default="off",
                       help="on: tables' provisioned throughput, burst capacity, on-demand maximums and partition "
                            "limits are applied as DynamoDB applies them, with its throttling errors (the workers "
                            "share the buckets); "
                            "off (the default): nothing is throttled, as local test suites expect")
    serve.add_argument("--split-for-heat", type=_seconds, default=DEFAULT_HEAT_SECONDS, metavar="SECONDS",
                       help="with --throttling on, how long a partition runs at its limit before it splits for heat "
                            f"(default {DEFAULT_HEAT_SECONDS:g}; a split spreads its keys over two partitions)")
    # (a development option, hidden from --help: a test shows a split for size with a few MB; docs/TESTING.md)
    serve.add_argument("--partition-size-limit", type=int, default=DEFAULT_PARTITION_BYTES, metavar="BYTES",
                       help=argparse.SUPPRESS)
    serve.add_argument("--advisor", choices=("auto", "on", "off"), default=os.environ.get("OPENDDB_ADVISOR", "auto"),
                       help="on: the standards advisor observes the requests (sampled on a busy server) and reports "
                            "at GET /openddb/advisor (`openddb advise`), from one process unless --workers is given; "
                            "auto (the default): on where the server is one process (--in-memory, --dev, "
                            "--workers 1) or --advisor-config is given, off where several processes would each see "
                            "a part; off: nothing observed (docs/ADVISOR.md)")
    serve.add_argument("--advisor-config", metavar="FILE", default=os.environ.get("OPENDDB_ADVISOR_CONFIG"),
                       help="the advisor's thresholds and declared access patterns (JSON; docs/ADVISOR.md)")


def _quota_options(serve: argparse.ArgumentParser) -> None:
    """The account's quotas: DynamoDB's defaults, changed, or lifted (api/quotas.py)."""
    group = serve.add_argument_group("account quotas (see docs/TESTING.md)")
    group.add_argument("--quotas", choices=("on", "off"), default=os.environ.get(quotas.APPLIED_VARIABLE, "on"),
                       help="on (the default): the account's quotas apply as on a new AWS account (capacity per "
                            "account and per table, decreases a day, switches to on-demand, table-class changes, "
                            "2,500 tables); off: none of them does, for test suites that resize tables more than an "
                            "account may ($OPENDDB_QUOTAS)")
    group.add_argument("--quota", action="append", default=[], metavar="NAME=VALUE",
                       help=f"set a quota as Service Quotas would (repeatable): {', '.join(quotas.NAMES)}; "
                            "DescribeLimits reports the capacity ones")


def _store_copy_parser(commands: Any) -> None:
    backup = commands.add_parser("backup", help="copy the whole embedded store, consistently, into a new directory "
                                                "(a data dir; the server may be running)")
    backup.add_argument("path", help="the directory to copy into (made if missing; must hold no store)")
    restore = commands.add_parser("restore", help="replace the embedded store with a copy made by `openddb backup` "
                                                  "(the server must be stopped)")
    restore.add_argument("path", help="the directory `openddb backup` made")
    for command in (backup, restore):
        add_data_dir_option(command)
        add_key_options(command)  # (an encrypted store's copy is encrypted with its key)


def _store_copy(args: argparse.Namespace) -> int:
    try:
        key = store_key(args)
        errors = driver(key).error  # (SQLCipher's errors are its own classes)
    except (StartupError, EncryptionUnavailable) as error:
        print(f"openddb: {error}", file=sys.stderr)
        return 1
    try:
        if args.command == "backup":
            copied = backup_store(args.data_dir, args.path, key)
        else:
            copied = restore_store(args.path, args.data_dir, key)
    except (StoreKeyRefused, StoreCopyError, OSError, errors) as error:
        print(f"openddb: {error}", file=sys.stderr)
        return 1
    print(f"openddb {args.command}: {', '.join(copied)}")
    return 0


def _cert_parser(commands: Any) -> None:
    cert = commands.add_parser("cert", help="make a local certificate authority and a server certificate for "
                                            "serve --tls-cert/--tls-key (needs: pip install 'openddb[tls]')")
    cert.add_argument("--out", default="./openddb-tls", metavar="DIR",
                      help="where to write openddb-ca.pem, openddb-cert.pem, openddb-key.pem (default ./openddb-tls)")
    cert.add_argument("--host", action="append", default=[], metavar="NAME",
                      help="a host name or IP address the certificate is for, besides localhost, 127.0.0.1 and ::1 "
                           "(repeatable)")
    cert.add_argument("--days", type=int, default=825, help="days the certificates are valid (default 825)")


def _cert(args: argparse.Namespace) -> int:
    try:
        from openddb.certificates import DEFAULT_HOSTS, make_certificates
    except ImportError:
        print("openddb: openddb cert needs the cryptography package: pip install 'openddb[tls]'", file=sys.stderr)
        return 2
    if args.days < 1:
        print("openddb: --days must be at least 1", file=sys.stderr)
        return 2
    files = make_certificates(args.out, [*DEFAULT_HOSTS, *args.host], args.days)
    print(f"certificate authority (clients trust it): {files.ca}\n"
          f"serve with: openddb serve --tls-cert {files.cert} --tls-key {files.key}\n"
          f"boto3: boto3.client('dynamodb', endpoint_url='https://localhost:8000', verify='{files.ca}')")
    return 0


_LOCAL_EPILOG = """\
DynamoDB Local's options are accepted too, so scripts and container definitions written for it run unchanged:
-port, -dbPath, -inMemory and -cors are the options above; -sharedDb is --shared (one set of tables for every
access key and region, already the default with --auth off); -disableTelemetry changes nothing
(OpenDDB sends no telemetry); -delayTransientStatuses is --delay-transient-statuses (2 seconds);
-optimizeDbBeforeStartup compacts the embedded store and refreshes its query statistics before serving; -jar FILE
and -Dname=value (java's) are ignored."""


def _local_flags(serve: argparse.ArgumentParser) -> None:
    """DynamoDB Local's options with no OpenDDB counterpart (see _LOCAL_EPILOG)."""
    local = serve.add_argument_group("DynamoDB Local's options (see below)")
    local.add_argument("-sharedDb", dest="namespaces", action="store_const", const="shared", help=argparse.SUPPRESS)
    local.add_argument("-disableTelemetry", action="store_true", help=argparse.SUPPRESS)
    local.add_argument("-optimizeDbBeforeStartup", action="store_true", help=argparse.SUPPRESS)
    local.add_argument("-jar", metavar="FILE", help=argparse.SUPPRESS)
    local.add_argument("-help", action="help", help=argparse.SUPPRESS)


def _stream_options(serve: argparse.ArgumentParser) -> None:
    streams = serve.add_argument_group("DynamoDB Streams")
    streams.add_argument("--stream-shards", type=int, default=_STREAM_DEFAULTS.shards, metavar="N",
                         help=f"shards open at once per stream, by partition-hash range "
                              f"(default {_STREAM_DEFAULTS.shards})")
    streams.add_argument("--stream-shard-seconds", type=float, default=_STREAM_DEFAULTS.shard_seconds, metavar="S",
                         help="a shard's life before it rolls over to a child shard (default 14400: 4 hours)")
    streams.add_argument("--stream-retention-seconds", type=float, default=_STREAM_DEFAULTS.retention_seconds,
                         metavar="S", help="how long stream records are kept (default 86400: DynamoDB's 24 hours)")
    streams.add_argument("--trigger", action="append", default=[], metavar="TABLE=URL",
                         help="POST the table's stream records to URL in batches, as AWS Lambda receives them "
                              "(repeatable)")
    streams.add_argument("--config", metavar="FILE",
                         help="triggers with their settings: a TOML ([[trigger]]) or JSON ({\"trigger\": [...]}) file")


_LIMIT_DEFAULTS = ConnectionLimits()


def _connection_options(serve: argparse.ArgumentParser) -> None:
    limits = serve.add_argument_group("connections (per worker; see docs/OPERATIONS.md)")
    limits.add_argument("--request-timeout", type=float, default=_LIMIT_DEFAULTS.request_seconds, metavar="S",
                        help="a request must arrive whole within S seconds of its first byte, else 408 and the "
                             "connection closed (default 60)")
    limits.add_argument("--idle-timeout", type=float, default=_LIMIT_DEFAULTS.idle_seconds, metavar="S",
                        help="close keep-alive connections idle for S seconds, as DynamoDB does after about a minute "
                             "(default 60)")
    limits.add_argument("--max-connections", type=int, default=0, metavar="N",
                        help="open connections per worker (default: what the open-files limit allows, raised to "
                             "its hard limit at start)")
    limits.add_argument("--tls-cert", metavar="FILE",
                        help="serve HTTPS with this certificate chain (PEM; `openddb cert` makes one), with --tls-key")
    limits.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    limits.add_argument("--max-buffered-mb", type=int, default=_LIMIT_DEFAULTS.buffered_bytes >> 20, metavar="MB",
                        help="bytes of requests still arriving that a worker holds before it reads no more of them "
                             "until some finish (default 256)")


def _auth_options(serve: argparse.ArgumentParser) -> None:
    auth = serve.add_argument_group("identity")
    auth.add_argument("--auth", choices=("off", "verify"), default=os.environ.get("OPENDDB_AUTH", "off"),
                      help="off (the default, as local servers do): any credentials work, signatures are read but not "
                           "checked; verify: every request's SigV4 signature is checked against the known keys, as "
                           "DynamoDB does ($OPENDDB_AUTH)")
    auth.add_argument("--audit-log", metavar="FILE", default=os.environ.get("OPENDDB_AUDIT_LOG"),
                      help="append a JSON line (CloudTrail's management-event shape) for every control-plane call and "
                           "every call refused for who made it ($OPENDDB_AUDIT_LOG)")
    auth.add_argument("--root-credentials", metavar="ACCESS_KEY:SECRET[@ACCOUNT]", action="append",
                      help="an account's root access key and secret for --auth verify (repeatable: one per account; "
                           f"@ACCOUNT, 12 digits, defaults to {DEFAULT_ACCOUNT}; default: "
                           "$OPENDDB_ROOT_ACCESS_KEY_ID and $OPENDDB_ROOT_SECRET_ACCESS_KEY)")
    auth.add_argument("--namespaces", choices=("shared", "account-region"),
                      default=os.environ.get("OPENDDB_NAMESPACES"),
                      help="shared: one set of tables for every account and region (DynamoDB Local's -sharedDb; the "
                           "default with --auth off); account-region: tables, streams and backups belong to the "
                           "caller's account and region, as on DynamoDB (the default with --auth verify) "
                           "($OPENDDB_NAMESPACES)")
    auth.add_argument("--shared", dest="namespaces", action="store_const", const="shared",
                      help="the same as --namespaces shared")


def _root_from_environment() -> list[str]:
    key, secret = os.environ.get("OPENDDB_ROOT_ACCESS_KEY_ID"), os.environ.get("OPENDDB_ROOT_SECRET_ACCESS_KEY")
    return [f"{key}:{secret}"] if key and secret else []


def namespaced(args: argparse.Namespace) -> bool:
    """Whether tables belong to their account and region (--namespaces; by default with --auth verify only)."""
    return (args.namespaces or ("account-region" if args.auth == "verify" else "shared")) == "account-region"


def _fault_injector(args: argparse.Namespace) -> FaultInjector | None:
    """The errors `--inject-errors` asks for (None: none); StartupError for a SPEC that cannot be read."""
    if not args.inject_errors:
        return None
    from openddb.api.dispatch import DYNAMODB_OPERATIONS  # (the API layer loads only when a server starts)

    try:
        return FaultInjector([parse_spec(spec, DYNAMODB_OPERATIONS) for spec in args.inject_errors])
    except SpecError as error:
        raise StartupError(str(error)) from None


def _audit_log(args: argparse.Namespace) -> AuditLog | None:
    """The audit log `--audit-log` names (None: none); StartupError if it cannot be written."""
    if args.audit_log is None:
        return None
    try:
        return AuditLog(args.audit_log)
    except OSError as error:
        raise StartupError(f"--audit-log {args.audit_log}: {error.strerror or error}") from None


def _verifier(args: argparse.Namespace) -> Verifier | None:
    """The signature checks `--auth verify` asks for (None with --auth off); StartupError if it lacks its keys."""
    if args.auth == "off":
        return None
    roots: dict[str, Credentials] = {}
    for given in args.root_credentials or _root_from_environment():
        pair, _, account = given.partition("@")
        key, _, secret = pair.partition(":")
        account = account or DEFAULT_ACCOUNT
        if not key or not secret or not (len(account) == 12 and account.isdigit()):
            raise StartupError(f"--root-credentials {key or '?'}:...: ACCESS_KEY:SECRET[@ACCOUNT], ACCOUNT 12 digits")
        if key in roots:
            raise StartupError(f"--root-credentials {key}: given twice")
        roots[key] = Credentials(key, secret, account, f"arn:aws:iam::{account}:root", account)
    if not roots:
        raise StartupError("--auth verify needs --root-credentials ACCESS_KEY:SECRET (or "
                           "OPENDDB_ROOT_ACCESS_KEY_ID and OPENDDB_ROOT_SECRET_ACCESS_KEY)")
    return Verifier(roots)


def _advisor(args: argparse.Namespace, dispatcher: Dispatcher) -> Advisor | None:
    """The standards advisor `--advisor on` asks for (None: off); StartupError if its configuration is unusable."""
    if args.advisor == "off":
        return None
    from openddb.advisor.listener import Advisor  # (imports the API layer, as a starting server does)

    return Advisor(_advisor_settings(args), lambda: dispatcher.engine)


def _advisor_settings(args: argparse.Namespace) -> Settings:
    """The advisor's settings from --advisor-config; StartupError if the file cannot be used."""
    try:
        return load(args.advisor_config)
    except SettingsError as error:
        raise StartupError(str(error)) from None


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS context of --tls-cert/--tls-key (None: plain HTTP); StartupError if they cannot be used."""
    if args.tls_cert is None and args.tls_key is None:
        return None
    if args.tls_cert is None or args.tls_key is None:
        raise StartupError("--tls-cert and --tls-key go together")
    try:
        return server_context(args.tls_cert, args.tls_key)
    except TlsSetupError as error:
        raise StartupError(str(error)) from None


def _limits(args: argparse.Namespace) -> ConnectionLimits:
    """The connection limits the options ask for (StartupError if they make no sense)."""
    if args.request_timeout <= 0 or args.idle_timeout <= 0 or args.max_connections < 0 or args.max_buffered_mb < 1:
        raise StartupError("--request-timeout and --idle-timeout must be positive, --max-connections at least 0 "
                           "(0: from the open-files limit) and --max-buffered-mb at least 1")
    return ConnectionLimits(args.request_timeout, args.idle_timeout, args.max_connections,
                            args.max_buffered_mb << 20)


def _tail_parser(commands: Any) -> None:
    streams = commands.add_parser("streams", help="read DynamoDB Streams")
    actions = streams.add_subparsers(dest="action", required=True)
    tail = actions.add_parser("tail", help="print a table's stream records as JSON lines as they arrive")
    tail.add_argument("table")
    tail.add_argument("--endpoint", default="http://127.0.0.1:8000", metavar="URL",
                      help="the server (default http://127.0.0.1:8000)")
    tail.add_argument("--from", dest="start", choices=("trim_horizon", "latest"), default="trim_horizon",
                      help="trim_horizon: every record kept; latest: only new ones (default trim_horizon)")
    tail.add_argument("--region", default="us-east-1", help="the region of the table (default us-east-1)")


def _stream_settings(args: argparse.Namespace) -> StreamSettings:
    if args.stream_shards < 1 or args.stream_shard_seconds <= 0 or args.stream_retention_seconds <= 0:
        raise StartupError("--stream-shards must be at least 1, and the stream durations positive")
    return StreamSettings(args.stream_shards, args.stream_shard_seconds, args.stream_retention_seconds)


def _engine(args: argparse.Namespace) -> tuple[Engine, str]:
    """The storage engine the options ask for, and how the start-up log line names it (StartupError if it cannot
    be opened)."""
    if args.engine:
        if args.store_key is not None:
            raise StartupError("an encryption key is for the embedded store: PostgreSQL's data is encrypted at rest "
                               "by its own means, which its operator sets up (see docs/ENCRYPTION.md)")
        postgres = open_postgres(args.engine, args.engine_replicas, args.replica_max_lag)
        postgres.stream_settings = _stream_settings(args)
        mode = "LISTEN/NOTIFY" if postgres.listening else "polling"
        replicas = f", {len(args.engine_replicas)} replicas for eventually consistent reads" \
            if args.engine_replicas else ""
        return postgres, f"engine: postgresql {postgres.location}, catalog changes by {mode}{replicas}"
    if args.engine_replicas:
        raise StartupError("--engine-replica needs --engine postgresql://... (the primary)")
    sqlite = open_sqlite(None if args.in_memory else args.data_dir, args.sync, args.disk_reserve_mb << 20,
                         args.store_key)
    sqlite.stream_settings = _stream_settings(args)
    return sqlite, "engine: sqlite, data: " + ("memory" if args.in_memory else os.path.abspath(args.data_dir)) + \
        (", encrypted at rest" if sqlite.encrypted else "")


async def _run(args: argparse.Namespace, sock: socket.socket, quiet: bool = False, shared: bool = False,
               opened: tuple[Engine, str] | None = None, metrics: Metrics | None = None,
               buckets: str | None = None, node: Node | None = None,
               balance: tuple[Shares, int] | None = None) -> None:
    """Serve on `sock` until SIGINT/SIGTERM; `shared`: other worker processes write to the same store; `opened`:
    the engine already opened for this process; `metrics`: this worker's counts, shared with the others;
    `buckets`: the file of the throttle's buckets the workers share (api/shared_buckets.py); `node`: this worker's
    name among the PostgreSQL nodes that tell each other their draws (api/throttle_exchange.py); `balance`: the
    workers' shares of `sock`'s connections and this worker's index (server/balance.py)."""
    from openddb.api.dispatch import Dispatcher
    from openddb.server.http import serve
    engine, where = opened or _engine(args)
    # Workers sharing a store do not block their event loop on another's write lock; they retry shortly.
    # (On PostgreSQL the locks a write may meet are other groups' rows, of this node's other workers or of other
    # nodes, or of this worker's commit in flight: its writes never block the event loop on them, see
    # `PostgresEngine._group_write`.)
    engine.session.wait = not shared and not engine.writes_ahead
    # ... and they stage their writes without the lock, taking it only to check and commit them.
    engine.session.optimistic = shared
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    ready = asyncio.Event()
    dispatcher = Dispatcher(engine)
    verifier = _verifier(args)
    if verifier is not None:  # users' access keys and temporary credentials, from the identity store
        verifier.lookup = dispatcher.identity.store.credentials
    dispatcher.verifier = verifier
    dispatcher.secure = dispatcher.identity.secure = args.tls_cert is not None
    dispatcher.namespaced = namespaced(args)
    dispatcher.audit = _audit_log(args)
    dispatcher.faults = _fault_injector(args)
    if args.throttling == "on":
        dispatcher.throttle = _throttle(args, buckets, node)
        dispatcher.listeners.append(dispatcher.throttle)
    task = asyncio.create_task(serve(dispatcher, args.host, args.port, sock=sock, ready=ready, stop=stop,
                                     cors=args.cors, control=_control(args), limits=_limits(args),
                                     tls=_tls(args), console=Console() if args.console == "on" else None,
                                     log_format=args.log_format, metrics=metrics, advisor=_advisor(args, dispatcher),
                                     balance=balance))
    await ready.wait()
    host, port = sock.getsockname()[:2]
    if not quiet:
        scheme = "https" if args.tls_cert else "http"
        log.info("OpenDDB %s listening on %s://%s:%d (%s)", __version__, scheme, host, port, where)
        if args.console == "on":
            log.info("console at %s://%s:%d/console", scheme, host, port)
        if args.dev:
            log.warning("--dev: anyone who reaches http://%s:%d/openddb/ can empty the store and move the clock",
                        host, port)
    try:
        await task
    finally:
        dispatcher.engine.close()  # (the store in use: a reset replaces the one opened here)
        log.info("OpenDDB stopped")


def _throttle(args: argparse.Namespace, buckets: str | None, node: Node | None) -> Throttle:
    """The throttle of `--throttling on`: on the buckets the workers share, if any, and on PostgreSQL telling the
    other nodes its draws (worker 0 of each server takes theirs)."""
    shared = SharedBuckets(buckets) if buckets else None
    exchange = DrawExchange(shared, node) if shared is not None and node is not None and args.engine else None
    return Throttle(shared=shared, exchange=exchange, heat_seconds=args.split_for_heat,
                    partition_bytes=args.partition_size_limit)


def _control(args: argparse.Namespace) -> Control | None:
    """With --dev, the test-control endpoints: a reset closes the store and opens it again emptied."""
    if not args.dev:
        return None
    from openddb.server.control import Control, ControlRefused

    def reopen(old: Engine) -> Engine:
        if args.engine:
            raise ControlRefused("a reset empties the embedded store; this server's engine is PostgreSQL")
        old.close()
        if not args.in_memory:
            remove_sqlite_store(args.data_dir)
        return _engine(args)[0]

    return Control(reopen)


def _triggers(args: argparse.Namespace) -> list[TriggerConfig]:
    """The triggers of --trigger and --config, checked before the server starts; a batch given up on goes to
    `<data dir>/triggers/failures.jsonl` unless the trigger names its own on-failure file."""
    from openddb.streams.triggers import load_config, parse_trigger

    try:
        configs = [parse_trigger(spec) for spec in args.trigger]
        if args.config:
            configs += load_config(args.config)
    except (ValueError, OSError) as error:
        raise StartupError(str(error)) from None
    names = [config.name for config in configs]
    if len(set(names)) != len(names):
        raise StartupError("a trigger (table and URL) is given twice")
    for config in configs:
        if config.on_failure is None and not args.in_memory:
            config.on_failure = os.path.join(args.data_dir, "triggers", "failures.jsonl")
        if args.store_key is not None and config.on_failure is not None and \
                _inside(config.on_failure, args.data_dir):
            config.payload = False  # (the batch's items would be plaintext beside the encrypted store)
    return configs


def _inside(path: str, directory: str) -> bool:
    """Whether `path` is under `directory`."""
    return os.path.commonpath([os.path.realpath(path), os.path.realpath(directory)]) == \
        os.path.realpath(directory)


def _start_deliverer(args: argparse.Namespace, configs: list[TriggerConfig], sock: socket.socket) -> int | None:
    """Fork the one process that delivers the triggers (whatever the number of workers), before any thread or
    event loop exists. It is a client of this server's Streams API over loopback: the socket is bound already,
    so its first requests wait in the listen queue until the server runs."""
    if not configs:
        return None
    from openddb.streams.triggers import StateStore, run_triggers

    endpoint = endpoint_of(sock)
    try:
        state = StateStore(None if args.in_memory else os.path.join(args.data_dir, "triggers", "state.json"))
    except (ValueError, OSError) as error:
        raise StartupError(str(error)) from None
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        sock.close()
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda _signum, _frame: stop.set())
        stop_with_parent(parent)
        run_triggers(configs, endpoint, state, stop)
        code = 0
    except BaseException:
        log.exception("the trigger deliverer failed")
    finally:
        os._exit(code)


def _stop_deliverer(pid: int | None, sock: socket.socket) -> None:
    """Stop the deliverer and wait for it (it saves its positions as it goes; a batch cut short is sent again
    after a restart)."""
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    # A request it sent as the workers stopped may wait in the listen queue of a socket nobody serves any more
    # (this process keeps one open): closing it refuses the request instead of leaving it to time out.
    sock.close()
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # it is gone already (a supervisor reaped it)


def health(endpoint: str | None, ca: str | None = None) -> int:
    """0 if the server at `endpoint` answers its health check (`GET /`, no signature needed), else 1; `ca`: the
    certificate authority an https:// endpoint's certificate is checked against (else the system's)."""
    import ssl
    import urllib.request

    url = endpoint or f"http://127.0.0.1:{_served_port()}/"
    try:
        context = ssl.create_default_context(cafile=ca) if url.startswith("https:") else None
        with urllib.request.urlopen(url, timeout=5, context=context) as answer:
            healthy = answer.status == 200 and answer.read().startswith(b"healthy")
    except OSError as error:
        print(f"openddb: {url} does not answer: {error}", file=sys.stderr)
        return 1
    if not healthy:
        print(f"openddb: {url} answers, but not as an OpenDDB server", file=sys.stderr)
    return 0 if healthy else 1


def _served_port() -> str:
    """The port to check: in a container whose first process is `openddb serve`, the one its command line names
    (a DynamoDB Local command line's `-port` included), else $OPENDDB_PORT, else 8000."""
    try:
        with open("/proc/1/cmdline", "rb") as handle:
            argv = [part.decode(errors="replace") for part in handle.read().split(b"\0")]
    except OSError:
        argv = []
    port = os.environ.get("OPENDDB_PORT", "8000")
    if "serve" in argv and any("openddb" in part for part in argv[:3]):
        for name, value in zip(argv, [*argv[1:], ""]):
            if name in ("--port", "-port"):
                port = value
            elif name.startswith("--port="):
                port = name.partition("=")[2]
    return port


def _tail(args: argparse.Namespace) -> int:
    from openddb.streams.tail import tail

    return tail(args.endpoint, args.table, args.start.upper(), args.region)


def main(argv: list[str] | None = None) -> int:
    """The `openddb` command; a mistake in how the server is started is one line on stderr and exit code 2."""
    argv = sys.argv[1:] if argv is None else argv
    # java's -Dname=value options, as DynamoDB Local's command lines carry them, mean nothing here.
    args = _parser().parse_args([arg for arg in argv if not _JAVA_PROPERTY.match(arg)])
    if args.command == "streams":
        return _tail(args)
    if args.command == "health":
        return health(args.endpoint, args.ca)
    if args.command == "cert":
        return _cert(args)
    if args.command in ("backup", "restore"):
        return _store_copy(args)
    if args.command == "rekey":
        return rekey(args)
    if args.command == "advise":
        return advise_command.main(args)
    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT,
                        stream=sys.stderr)
    try:
        return _start(args)
    except StartupError as error:
        print(f"openddb: {error}", file=sys.stderr)
        return 2


def _seconds(text: str) -> float:
    """A number of seconds, at least 0 (argparse's type for --delay-transient-statuses, --split-for-heat)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= seconds < 86400:
        raise argparse.ArgumentTypeError(f"{text}: from 0 to 86400 seconds")
    return seconds


_JAVA_PROPERTY = re.compile(r"-D[\w.]+=")


def _check_counts(args: argparse.Namespace) -> None:
    """StartupError for a disk reserve, a number of workers or a --dev with workers that cannot be served."""
    if args.disk_reserve_mb < 0:
        raise StartupError(f"--disk-reserve-mb {args.disk_reserve_mb}: at least 0")
    if args.workers is not None and args.workers < 1:
        raise StartupError(f"--workers {args.workers}: at least 1")
    if args.dev and args.workers not in (None, 1):
        raise StartupError("--dev serves from one process (the clock and the store it controls are the process's): "
                           "leave out --workers")


def _start(args: argparse.Namespace) -> int:
    if args.wording is not None:  # (read when the API modules load, after this, in every worker they fork)
        os.environ["OPENDDB_WORDING"] = args.wording
    if args.delay_transient_statuses is not None:  # (read by api/transient.py, in every worker)
        os.environ["OPENDDB_TRANSIENT_SECONDS"] = repr(args.delay_transient_statuses)
    try:  # (read by api/quotas.py, in every worker)
        quotas.export(args.quotas == "on", quotas.parse(args.quota))
    except quotas.QuotaSpecError as error:
        raise StartupError(str(error)) from None
    args.store_key = store_key(args)  # (once, before the workers fork: a key command runs once)
    configs = _triggers(args)
    _stream_settings(args)
    _limits(args)
    _tls(args)
    _verifier(args)
    _fault_injector(args)
    audit = _audit_log(args)  # (opened here to report a mistake at once; each worker opens its own)
    if audit is not None:
        audit.close()
    _check_counts(args)
    check_engine_urls(args.engine, args.engine_replicas)
    check_port(args.port)
    raise_file_limit()  # (connections are open files; the workers forked later inherit it)
    if args.advisor == "auto" and args.advisor_config:  # (a configuration asks for the advisor)
        args.advisor = "on"
    workers = args.workers or os.cpu_count() or 1
    if args.in_memory or args.dev or (args.advisor == "on" and args.workers is None):
        # An in-memory store lives in one process; a --dev server's clock too; and the advisor's observations,
        # unless --workers asks for more (then each worker advises on the requests it serves).
        workers = 1
    if args.advisor == "auto":  # (on where one process sees every request: its report is the whole traffic's)
        args.advisor = "on" if workers == 1 else "off"
    if args.advisor == "on":
        _advisor_settings(args)  # (a mistake in its file is reported before anything is served)
        if workers > 1:
            log.warning("--advisor on with --workers %d: each worker advises on the requests it serves, and GET "
                        "/openddb/advisor answers from one of them", workers)
    bound = time.time()  # (the throttle's draws other nodes made after this are new to this server)
    sock = bind(args.host, args.port)
    try:
        # Open the store before anything is forked: a bad data dir or an unreachable database is reported here,
        # and workers never race to create the schema. One process serving without triggers keeps it open.
        engine_and_name = _engine(args)
        if args.optimizeDbBeforeStartup:
            _optimize(engine_and_name[0])
        opened: tuple[Engine, str] | None = engine_and_name
        if opened is not None and (workers > 1 or configs):
            opened[0].close()
            opened = None
    except BaseException:
        sock.close()
        raise
    deliverer = _start_deliverer(args, configs, sock)
    try:
        return _serve(args, sock, workers, opened, bound)
    finally:
        _stop_deliverer(deliverer, sock)


def _optimize(engine: Engine) -> None:
    """DynamoDB Local's -optimizeDbBeforeStartup: the store's tables optimized before serving, where the engine
    does anything for it."""
    started = time.monotonic()
    if engine.optimize():
        log.info("-optimizeDbBeforeStartup: the store was optimized in %.1f s", time.monotonic() - started)
    else:
        log.info("-optimizeDbBeforeStartup: nothing to do for this engine (it keeps its tables optimized itself)")


def _serve(args: argparse.Namespace, sock: socket.socket, workers: int, opened: tuple[Engine, str] | None,
           bound: float) -> int:
    """Serve on the bound socket, in this process or in `workers` forked ones, until stopped; `bound`: when the
    socket was bound (time.time()), from when clients may reach this server."""
    try:
        import uvloop

        runner: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        runner = asyncio.run
    # Each worker's metrics snapshot goes in a directory of its own here, which the worker answering /metrics reads,
    # and with --throttling on the token buckets every worker draws on, so a table's rate holds across them (and,
    # on PostgreSQL, the draws the nodes tell each other are taken from them: one process has them too).
    share = share_directory() if workers > 1 or args.engine else None
    buckets = os.path.join(share, "throttle-buckets") if share and args.throttling == "on" else None
    if buckets is not None:
        create_buckets(buckets)
    server = uuid.uuid4().hex[:12]  # (this server's name among the nodes telling each other their draws)
    try:
        if workers == 1:
            runner(_run(args, sock, opened=opened, buckets=buckets, node=Node(server, 0, bound)))
            return 0
        if args.port == 0:
            args.port = sock.getsockname()[1]

        shares = Shares(workers)

        def run_worker(index: int) -> int:
            # Every worker inherits the socket; each accepts while it holds no more connections than the others.
            shares.starting(index)
            runner(_run(args, sock, quiet=index != 0, shared=True, metrics=Metrics(share, index), buckets=buckets,
                        node=Node(server, index, bound), balance=(shares, index)))
            return 0

        return supervise(workers, run_worker, shares.absent)
    finally:
        if share is not None:
            shutil.rmtree(share, ignore_errors=True)

if __name__ == "__main__":
    raise SystemExit(main())
