"""What one worker's connections share, and what happens at the end of each event-loop pass (`ServerState`).

Requests are answered on the event-loop thread as they arrive (server/http.py); their answers are sent together
at the end of the pass, and writes of a pass share one group commit: answers of writes are held until it is
durable. Also here: the background duties run about once a second between passes, and the connection-limit
sweep (server/connection_limits.py).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from openddb import clock
from openddb.advisor import report
from openddb.advisor.listener import Advisor
from openddb.advisor.state import ServerState as AdvisedState
from openddb.api import read_ahead, write_ahead
from openddb.api.context import visible_table
from openddb.api.incoming import Incoming
from openddb.errors import AccessDeniedException, DynamoDBError, InternalServerError, ServiceUnavailable
from openddb.identity.sigv4 import SignedRequest
from openddb.model.schema import TableMeta, table_arn
from openddb.observe import prometheus
from openddb.observe.cloudwatch import JSON_TARGET as CLOUDWATCH_TARGET
from openddb.observe.insights import Insights, rule_names
from openddb.observe.metrics import Metrics
from openddb.observe.namespaces import scoped, scoped_rules
from openddb.server import cloudwatch_wire
from openddb.server.connection_limits import SWEEP_SECONDS, Budget, ConnectionLimits, Watch
from openddb.server.cors import Cors
from openddb.server.requests_log import LogFormat, RequestLog

if TYPE_CHECKING:
    from openddb.api.dispatch import Dispatcher
    from openddb.console.pages import Console
    from openddb.server.control import Control
    from openddb.server.http import HttpProtocol, _Request

    # A connection, its request, the answer waiting for the commit, and the group the request wrote into (its
    # `WriteSession.commits` when it wrote), or None if it wrote into none.
    _Held = tuple[HttpProtocol, _Request, bytes, int | None]

# A request fetched or locked ahead: its target, its body, the caller's table namespace.
Ahead = tuple[bytes, bytes, str]

log = logging.getLogger("openddb.http")

# After this many tries at the writer lock, a request (or a group) waits for it outright.
MAX_ATTEMPTS = 20
# A group commit of at least this many rows that finds the writer lock taken waits for it on a helper thread
# while the event loop goes on serving (new writes join the group); a smaller one blocks the loop for the wait.
_WAIT_BESIDE_ROWS = 64
# How often the dispatcher's background duties run (TTL expiry); if a group of writes is open, shortly after.
BACKGROUND_SECONDS = 1.0
# What `_commit` answers for a group whose commit the engine left in flight (see `Engine.send_commit`).
_SENT: list[_Held] = []
_BACKGROUND_RETRY_SECONDS = 0.01




class ServerState:
    """What the protocol instances share: open connections, the shutdown flag, and group commit.

    While the engine holds an open group transaction, responses are held here and released together
    right after one commit, at the end of the current event-loop pass: several requests in flight share one
    durable commit, and nothing is acknowledged before it is durable. If the engine could not commit the group
    (a conflict: another worker changed a row its optimistic writes had read), the held requests are run
    again, in order, under the writer lock, and their new answers are sent instead."""

    def __init__(self, dispatcher: Dispatcher, cors: Cors | None = None,
                 limits: ConnectionLimits | None = None, log_format: LogFormat = "text",
                 metrics: Metrics | None = None, advisor: Advisor | None = None) -> None:
        self.dispatcher = dispatcher
        self.engine = dispatcher.engine
        self.cors = cors or Cors()
        self.verifying = dispatcher.verifier is not None  # (then requests carry what their signature covers)
        self.metrics = metrics or Metrics()  # (GET /metrics; told of every request)
        # (Contributor Insights' key counts, told of each request by the metrics while any table has insights)
        self.metrics.insights = Insights(lambda: self.dispatcher.engine)
        self._sharing: asyncio.TimerHandle | None = None  # a later write of this worker's metrics, when one is due
        dispatcher.listeners.append(self.metrics)
        dispatcher.cloudwatch = self.cloudwatch_json  # (CloudWatch's calls in the AWS JSON protocol)
        self.advisor = advisor  # (GET /openddb/advisor; told of every request; None: --advisor off)
        if advisor is not None:
            dispatcher.listeners.append(advisor)
        # (decided once: a disabled log costs a request nothing; an enabled one is told of every request)
        self.request_log = RequestLog.open(log_format)
        if self.request_log is not None:
            dispatcher.listeners.append(self.request_log)
        # (then requests carry the client's address: the audit log and the request log record it, and
        # aws:SourceIp when calls are authorized)
        self.auditing = dispatcher.audit is not None or self.request_log is not None or self.verifying
        limits = limits or ConnectionLimits()
        self.watch = Watch(limits)
        self.budget = Budget(limits.buffered_bytes)
        self.sweeping: asyncio.TimerHandle | None = None
        self.connections: set[HttpProtocol] = set()
        self.connection_closed: Callable[[], None] | None = None  # (told when one goes: server/balance.py)
        self.closing = False
        self._held: list[_Held] = []
        self._flush_attempts = 0
        # Another worker's writer lock, waited for beside the event loop, then `release` again
        self._writer_wait = Beside("openddb-writer-wait", self.engine.wait_for_writer, self.release)
        # Answers waiting, in order: a group's whose commit the engine left in flight (`Engine.send_commit`), or
        # answers ready that must not overtake those (a connection's answers stay in request order); how many
        # commits are in flight; and the wait for their answers, one after another
        self._in_flight: deque[_Waiting] = deque()
        self._commits_out = 0
        self._commit_wait = Beside("openddb-commit-wait", self.engine.wait_for_commit, self._finish_commit)
        self._pass_ending = False
        self._outbox: list[tuple[asyncio.Transport, bytes, bool]] = []
        # Reads fetched ahead (`Engine.reads_ahead`): the requests with these targets wait, on their connections,
        # for the end of the pass that received them; then their reads go to the engine at once (`_read_pass`).
        # With `Engine.writes_ahead`, the single-item writes wait so too, and their items are locked at once.
        self.read_ahead_targets = read_ahead.TARGETS if self.engine.reads_ahead else frozenset()
        if self.engine.writes_ahead:
            self.read_ahead_targets |= write_ahead.TARGETS
        self._reading_ahead: list[HttpProtocol] = []
        self.background: asyncio.TimerHandle | None = None
        self.control: Control | None = None  # the test-control endpoints, with `--dev` only
        self.console: Console | None = None  # the web console (`--console off`: none)

    def handle(self, request: _Request) -> tuple[int, bytes]:
        if self.request_log is not None:
            self.end_pass_soon()  # (which writes the pass's lines)
        return self.dispatcher.handle(request)

    def read_soon(self, connection: HttpProtocol) -> None:
        """Run the requests `connection` put aside for reading ahead (see `read_ahead_targets`) after the other
        connections' requests of this pass arrived, with theirs."""
        if not self._reading_ahead:
            asyncio.get_running_loop().call_soon(self._read_pass)
        self._reading_ahead.append(connection)

    def _read_pass(self) -> None:
        """The engine reads ahead for the requests waiting to read, then each connection runs what it put aside,
        in its order. A group of writes this pass opened before (another connection's requests ran as they
        arrived) commits first, as it would at the end of the pass: its commit goes out now, the reads then come
        from committed state on the engine's other connection, in one round trip, and their answers need not wait
        for that commit (on the group's connection they would have, one round trip each, see `Engine.read_ahead`)."""
        if self._held and self._commits_out < self.engine.commits_in_flight and self.engine.remote_commits:
            self.release()
        connections, self._reading_ahead = self._reading_ahead, []
        reads, writes, readers, writers = self._aside(connections)
        try:
            try:
                read_ahead.read_ahead(self.engine, reads)
            except Exception:  # (a hint: whatever went wrong, each request still runs, and reads for itself)
                log.exception("reading ahead failed; the requests read for themselves")
                self.engine.end_read_ahead()
            # The connections without writes run first, before the writes' group begins (their answers need not
            # wait for its commit); the others after it, each connection's requests in its order.
            for connection in readers:
                connection.run_put_aside()
            if writes:
                self._lock_ahead(writes)
            for connection in writers:
                connection.run_put_aside()
        finally:
            self.engine.end_read_ahead()

    def _aside(self, connections: list[HttpProtocol]) -> tuple[list[Ahead], list[Ahead], list[HttpProtocol],
                                                                   list[HttpProtocol]]:
        """In one walk over what `connections` put aside: the reads to fetch ahead and the single-item writes to
        lock ahead (target, body, the caller's namespace), and the connections without such a write and with."""
        namespace_of = self.dispatcher.namespace_of
        reads: list[Ahead] = []
        writes: list[Ahead] = []
        readers: list[HttpProtocol] = []
        writers: list[HttpProtocol] = []
        for connection in connections:
            writing = False
            for request in connection.put_aside():
                target = request.target
                if target in write_ahead.TARGETS:
                    writing = True
                    into = writes
                elif target in read_ahead.TARGETS:
                    into = reads
                else:
                    continue
                if not request.too_large:
                    into.append((target, request.body, namespace_of(request.authorization)))
            (writers if writing else readers).append(connection)
        return reads, writes, readers, writers

    def _lock_ahead(self, writes: list[Ahead]) -> None:
        try:
            write_ahead.lock_ahead(self.engine, writes)
        except Exception:  # (a hint, as reading ahead: each write still runs, and locks for itself)
            log.exception("locking ahead failed; the writes lock for themselves")

    def _share_metrics(self, timed: bool = False) -> None:
        """Write this worker's metrics for the others (with --workers), now or, once, shortly."""
        if timed:
            self._sharing = None
        elif self._sharing is not None:
            return  # (a write is due shortly)
        delay = self.metrics.share()
        if delay and not self.closing:
            self._sharing = asyncio.get_running_loop().call_later(delay, self._share_metrics, True)

    def metrics_page(self) -> bytes:
        """GET /metrics: every worker's figures in Prometheus' text format (observe/prometheus.py)."""
        return prometheus.render(self.metrics.collected(), self.engine)

    def cloudwatch(self, operation: str, body: bytes, authorization: bytes | None,
                   signed: SignedRequest | None) -> tuple[int, bytes, bytes]:
        """A CloudWatch call on the metrics' history (server/cloudwatch_wire.py): status, CBOR body, header lines;
        `signed`: what its signature covers, with --auth verify."""
        signature = cloudwatch_wire.Signature(self.dispatcher.verifier, authorization, signed)
        snapshots, rules = self._caller_view(authorization)
        return cloudwatch_wire.answer(operation, body, snapshots, rules, signature)

    def cloudwatch_json(self, incoming: Incoming) -> tuple[int, bytes]:
        """A CloudWatch call in the AWS JSON protocol, as the dispatcher hands it over (its X-Amz-Target)."""
        operation = incoming.target[len(CLOUDWATCH_TARGET):].decode("latin-1")
        signature = cloudwatch_wire.Signature(self.dispatcher.verifier, incoming.authorization, incoming.signed)
        snapshots, rules = self._caller_view(incoming.authorization)
        return cloudwatch_wire.answer_json(operation, incoming.body, snapshots, rules, signature)

    def _caller_view(self, authorization: bytes | None) -> tuple[Callable[[], list[dict[str, Any]]],
                                                                 Callable[[], set[str]]]:
        """The metrics and Contributor Insights rules a CloudWatch caller sees: its account's and region's where
        tables are kept by account and region (observe/namespaces.py), else all."""
        namespace = self.dispatcher.namespace_of(authorization)
        return (lambda: scoped(self.metrics.collected(), namespace),
                lambda: scoped_rules(self._insight_rules(), namespace))

    def _insight_rules(self) -> set[str]:
        """The Contributor Insights rules the tables' enabled insights have now (observe/insights.py), qualified by
        their tables' namespaces."""
        engine = self.dispatcher.engine
        found: set[str] = set()
        for name in engine.list_tables():
            meta = visible_table(engine, name)
            for index, setting in (meta.contributor_insights if meta is not None else {}).items():
                if meta is not None and setting["status"] == "ENABLED":
                    found.update(meta.namespace + rule for rule in rule_names(meta, index, setting))
        return found

    def advisor_page(self, query: bytes, incoming: Incoming) -> tuple[int, bytes]:
        """GET /openddb/advisor[?table=T&account=A&region=R&since=EPOCH]: the advisor's report as JSON
        (docs/ADVISOR.md); 404 with --advisor off, 400 for a `since` that is not a number. With --auth verify the
        request is signed as an API call is (DynamoDB's errors otherwise) and answered for its caller alone
        (`_viewer`)."""
        if self.advisor is None:
            return 404, orjson.dumps({"message": "the advisor is off (openddb serve --advisor on)"})
        parameters = urllib.parse.parse_qs(query.decode("latin-1"))
        scope = report.Scope(*(parameters.get(name, [None])[0] for name in ("table", "account", "region")))
        since = parameters.get("since", [None])[0]
        try:
            moment = float(since) if since is not None else None
        except ValueError:
            return 400, orjson.dumps({"message": "since: epoch seconds expected"})
        viewer = None
        if self.verifying:
            try:
                scope, viewer = self._viewer(scope, incoming)
            except DynamoDBError as error:
                return error.status, orjson.dumps(error.to_wire())
        return 200, orjson.dumps(report.build(self.advisor, AdvisedState(self.dispatcher), scope, moment, viewer))

    def _viewer(self, scope: report.Scope, incoming: Incoming) -> tuple[report.Scope, report.Viewer]:
        """Under --auth verify, the report's caller: authenticated as an API call (identity/sigv4.py), it reads its
        own namespace alone (its account and its credential scope's region, with --namespaces account-region), and
        of it the tables it may describe: the root of the account every one, a user or role those on which its
        policies allow dynamodb:DescribeTable (a table named by `table=` and not allowed is AccessDeniedException,
        the words of a DescribeTable call's refusal)."""
        dispatcher = self.dispatcher
        caller = dispatcher.authenticate(incoming)
        if caller.namespace:
            scope = report.Scope(scope.table, caller.account, caller.region)
        access = dispatcher.access_of(caller, incoming)
        if access is None:
            return scope, report.Viewer(caller.account)
        if scope.table is not None:
            access.require("dynamodb:DescribeTable", table_arn(caller.region, caller.account, scope.table))

        def permits(meta: TableMeta) -> bool:
            try:
                access.require("dynamodb:DescribeTable", meta.arn)
            except AccessDeniedException:
                return False
            return True

        return scope, report.Viewer(caller.account, permits)

    def run_background(self) -> None:
        """The dispatcher's background duties, about every BACKGROUND_SECONDS, at a moment when no group of writes
        is open (they commit on their own)."""
        if self.closing:
            return
        loop = asyncio.get_running_loop()
        if self.engine.session.pending or self._held or self._in_flight:
            self.background = loop.call_later(_BACKGROUND_RETRY_SECONDS, self.run_background)
            return
        self.dispatcher.run_background()
        if self.metrics.insights is not None:
            self.metrics.insights.refresh()  # (which tables Contributor Insights counts: see observe/insights.py)
        self.metrics.sample(clock.now())  # (CloudWatch's one-minute data points: see observe/history.py)
        throttle = self.dispatcher.throttle
        if throttle is not None:  # (its splits kept in the store)
            try:
                throttle.upkeep(self.engine)
            except Exception as error:  # (the store out of reach or busy: the next round tries again)
                log.warning("the throttle's partition splits were not stored: %s", error)
        if throttle is not None and throttle.exchange is not None:  # (draws told across nodes)
            try:
                throttle.exchange.run(self.engine, time.monotonic())
            except Exception as error:  # (the store out of reach: the next round tries again)
                log.warning("the throttle's draws were not exchanged with the other nodes: %s", error)
        self._share_metrics()
        self.background = loop.call_later(BACKGROUND_SECONDS, self.run_background)

    def sweep(self) -> None:
        """Close the connections past their time (see server/connection_limits.py), about once a second."""
        if self.closing:
            return
        closed = self.watch.sweep(self.connections)  # type: ignore[arg-type]
        if closed:
            log.debug("closed %d connections past their time", closed)
        self.sweeping = asyncio.get_running_loop().call_later(SWEEP_SECONDS, self.sweep)

    def send_soon(self, transport: asyncio.Transport, response: bytes, keep_alive: bool) -> None:
        """Send an answer at the end of this event-loop pass, with the pass's other answers."""
        self._outbox.append((transport, response, keep_alive))
        self.end_pass_soon()

    def send_answers(self) -> None:
        """Send the answers `send_soon` collected (one burst: the clients wake once for many answers)."""
        outbox, self._outbox = self._outbox, []
        for transport, response, keep_alive in outbox:
            if transport.is_closing():
                continue
            transport.write(response)
            if not keep_alive:
                transport.close()

    def end_pass_soon(self) -> None:
        """At the end of this event-loop pass, send its answers and release the engine's read snapshot (see
        `Engine.reading`): one callback for both, scheduled by the first answer or read of the pass."""
        if not self._pass_ending:
            self._pass_ending = True
            asyncio.get_running_loop().call_soon(self._end_pass)

    def _end_pass(self) -> None:
        self._pass_ending = False
        self.send_answers()
        self.engine.end_reads()
        if self.request_log is not None:
            self.request_log.flush()
        self._share_metrics()

    def hold(self, connection: HttpProtocol, request: _Request, response: bytes, group: int | None) -> None:
        if not self._held:
            asyncio.get_running_loop().call_soon(self.release)
        self._held.append((connection, request, response, group))

    def _commit(self, held: list[_Held]) -> list[_Held] | None:
        """Commit the group and return the answers to send: the held ones, or after a conflict the new answers of
        the requests that wrote into the failed group, run again (reads and DDL keep their answers: those rest on
        committed state; so do writes into a group committed earlier in the pass, see `WriteSession.commits`);
        None if another worker holds the writer lock (nothing done); an empty list if the commit is in flight
        (`Engine.send_commit`)."""
        engine = self.engine
        outcome = engine.send_commit()
        if outcome == "busy":
            return None
        if outcome == "sent":
            return _SENT
        if outcome == "committed":
            return held
        session = engine.session
        failed = session.commits
        log.debug("write conflict with another worker: running %d requests again", sum(h[3] == failed for h in held))
        with session.serialized():
            answers = []
            self.dispatcher.replaying = True  # (each was observed at its first run: see Dispatcher.handle)
            try:
                for connection, request, response, group in held:
                    if group == failed:
                        response = request.render(*self.handle(request))
                    answers.append((connection, request, response, group))
            finally:
                self.dispatcher.replaying = False
            if engine.commit() != "committed":  # (under the lock, waiting for it: it cannot conflict)
                raise RuntimeError("a serialized group failed to commit")
            return answers

    def release(self) -> None:
        self.send_answers()  # answers given before the held ones go first: each connection's answers stay in order
        if self._commits_out >= self.engine.commits_in_flight:
            return  # (the group commits once a commit in flight is answered: see `_finish_commit`)
        held = self._held
        failed: DynamoDBError | None = None
        engine = self.engine
        # Wait for the lock outright when the group is small (the wait is short, a thread hop dearer) or after
        # many lost races (a busy neighbour cannot starve us); a large group waits beside the event loop.
        patient = self._flush_attempts >= MAX_ATTEMPTS or engine.group_rows < _WAIT_BESIDE_ROWS
        try:
            with engine.session.waiting(patient or engine.session.wait):
                answers = self._commit(held)
            if answers is None:
                # Another worker is committing. Instead of blocking the event loop until it is done, go on
                # serving: requests arriving meanwhile join the group, which commits as soon as the lock is free.
                self._flush_attempts += 1
                self._writer_wait.request()
                return
            if answers is _SENT:
                # The commit is in flight (a remote wait): go on serving; a new group forms meanwhile.
                self._in_flight.append(_Waiting(held, committing=True))
                self._commits_out += 1
                self._held = []
                self._commit_wait.request()
                return
            held = answers
        except Exception as error:
            failed = self._failure(error, len(held))
        self._held = []
        self._flush_attempts = 0
        if self._in_flight:  # (behind the answers of the commits in flight)
            self._in_flight.append(_Waiting(held, failed))
        else:
            self._answer(held, failed)

    def _failure(self, error: Exception, requests: int) -> DynamoDBError:
        if self.engine.unavailable(error):  # (the disk is full: nothing of the group was kept; said by the engine)
            return ServiceUnavailable()
        log.error("group commit failed; answering its %d requests with errors", requests, exc_info=error)
        return InternalServerError("Internal server error")

    def _answer(self, held: list[_Held], failed: DynamoDBError | None) -> None:
        """Send the answers of a group's requests, now that it committed (or failed: then its writes' answers
        are `failed`)."""
        for connection, request, response, group in held:
            connection.held -= 1
            if failed is not None and group is not None:  # (reads and DDL rest on committed state: they stand)
                response = request.render(failed.status, orjson.dumps(failed.to_wire()))
            transport = connection.transport
            if transport is None or transport.is_closing():
                continue
            transport.write(response)
            if not request.keep_alive:
                transport.close()
            elif self.closing:
                connection.close_if_idle()

    def _finish_commit(self) -> None:
        """The oldest commit in flight was answered: answer its requests and the answers ready behind it, up to the
        next commit still in flight, then commit the group that formed meanwhile."""
        self._commits_out -= 1
        first = self._in_flight[0]  # (the answers before it were sent when its predecessor's commit finished)
        first.committing = False
        try:
            self.engine.finish_commit()
        except Exception as error:
            first.failed = self._failure(error, len(first.held))
        while self._in_flight and not self._in_flight[0].committing:
            waiting = self._in_flight.popleft()
            self._answer(waiting.held, waiting.failed)
        if self._held:
            self.release()


@dataclass(slots=True)
class _Waiting:
    """Answers held until a group's commit in flight is answered: that group's (`committing` until then), or answers
    ready behind it; `failed`: what its writes answer instead, if the commit failed."""

    held: list[_Held]
    failed: DynamoDBError | None = None
    committing: bool = False


class Beside:
    """A wait that must not block the event loop: `wait` runs on a helper thread (started at the first request),
    then `then` on the loop that asked, once per `request`."""

    def __init__(self, name: str, wait: Callable[[], None], then: Callable[[], None]) -> None:
        self.name = name
        self._wait = wait
        self._then = then
        self._requests: queue.SimpleQueue[asyncio.AbstractEventLoop] | None = None

    def request(self) -> None:
        if self._requests is None:
            self._requests = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(self._requests,), name=self.name, daemon=True).start()
        self._requests.put(asyncio.get_running_loop())

    def _serve(self, requests: queue.SimpleQueue[asyncio.AbstractEventLoop]) -> None:
        while True:
            loop = requests.get()
            try:
                self._wait()
            finally:
                try:
                    loop.call_soon_threadsafe(self._then)
                except RuntimeError:  # the loop is closed: the server has stopped
                    return
