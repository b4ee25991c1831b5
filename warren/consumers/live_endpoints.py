"""Live endpoints, worker side: follow ``<prefix>.endpoints`` and serve what it says, without a restart.

At start the worker reads the endpoints stream to its end (latest record per endpoint) and serves every endpoint
applied there; from then on it hears each new record through an exclusive queue bound to the endpoints exchange,
and serves, re-serves (a changed configuration) or stops serving the endpoint at once. Nothing here needs the
admin API or its store: while they are down, the worker keeps delivering with the last configuration it knows.

Endpoints of the worker's own configuration file are the file's: a record naming one is ignored (logged once), but
for its routing: ``warren setup`` closes a file endpoint's routing while it promotes it, ordered, to partitions of
its own (warren/broker/ordered_promotion.py), and that holds here as for a live endpoint.

A record's signing secrets are sealed with the store's keys (warren/broker/endpoint_records.py): the worker opens them
with its ``[store] keys`` (default ``env:WARREN_STORE_KEY``). Without a key that opens them, it logs an error for
that endpoint (once per problem) and does not serve it (or keeps its last configuration); every other endpoint is
served as before.

Its connection is its own and plain, like endpoint health's: after a loss it reconnects, re-reads the stream and
applies whatever changed meanwhile. Every hour it re-appends the latest record of each endpoint it knows, so the
size-bounded stream only ever drops superseded records.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from warren.broker.amqp.connection import connect_once
from warren.broker.amqp.probe import all_exist
from warren.broker.amqp.stream_read import read_to_end
from warren.broker.endpoint_records import APPLY, EndpointRecord, SecretsUnavailable, decode_record
from warren.broker.endpoint_state.operator_events import PUBLISH_FAILURES
from warren.broker.route_fence import routed_reply
from warren.core.errors import BrokerUnavailable, TopologyError
from warren.store.keys import Sealer, StoreKeyError, sealer_from
from warren.topology import names
from warren.topology.config import Endpoint

__all__ = ["LiveEndpoints"]

log = logging.getLogger("warren.live")

RECONNECT_DELAY = 1.0
REFRESH_INTERVAL = 3600.0
RECONNECT_FAILURES: tuple[type[Exception], ...] = (BrokerUnavailable, TopologyError, *PUBLISH_FAILURES)
SERVE_FAILURES: tuple[type[Exception], ...] = (*RECONNECT_FAILURES, aiormq.exceptions.AMQPError)


class LiveEndpoints:
    """One worker's view of the live endpoints; ``serve``/``unserve`` are the worker's (see worker.py)."""

    def __init__(
        self,
        url: str | Sequence[str],
        prefix: str,
        *,
        serve: Callable[[Endpoint], Awaitable[None]],
        unserve: Callable[[str], Awaitable[None]],
        file_managed: Collection[str] = (),
        keys: Sequence[str] = ("env:WARREN_STORE_KEY",),
        routes: bool = False,
        route_unserved: Callable[[Endpoint], None] = lambda layout: None,
        close_routing: Callable[[str, bool], None] = lambda name, closed: None,
    ) -> None:
        """``routes``: this worker runs a routing stage, and answers an announcement that asks (route_fence.py).
        ``route_unserved(layout)``: an endpoint whose secrets cannot be opened here is still routed to (its lane
        holds its copies for a worker that can); ``unserve`` ends that when it is removed."""
        self.url = url
        self.routes = routes
        self._route_unserved = route_unserved
        self._close_routing = close_routing  # an ordered promotion under way: routed to no more (its record says)
        self._routed_unserved: set[str] = set()  # routed to but not served here (route_unserved, a failed serve)
        self.identity = uuid.uuid4().hex  # this follower's name in its answers: each router counted once
        self.prefix = prefix
        self._serve = serve
        self._unserve = unserve
        self.file_managed = frozenset(file_managed)
        self.known: dict[str, EndpointRecord] = {}  # latest record per endpoint
        self.serving: dict[str, Endpoint] = {}
        self.enabled = True  # False when the broker has no endpoints exchange (a topology set up before them)
        # Set while what this worker knows is current: cleared from a lost connection until the stream has been
        # read again. The router waits on it: it acks what its index says nobody wants, so it must not route
        # with an index that may lack an endpoint created meanwhile.
        self.current = asyncio.Event()
        self._connection: AbstractConnection | None = None
        self._channel: AbstractChannel | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._halted = False
        self._ignored: set[str] = set()
        self._file_versions: dict[str, int] = {}  # file endpoint -> version of its newest record (its routing)
        self.unopened: dict[str, str] = {}  # endpoint -> why its latest record's secrets could not be opened
        self._sealer: Sealer | StoreKeyError
        try:
            self._sealer = sealer_from(keys)
        except StoreKeyError as exc:
            self._sealer = exc

    async def start(self) -> None:
        """Read the stream, serve the endpoints it holds, and follow the broadcast from then on."""
        if not await self._connect():
            self.current.set()  # no stream: there are no live endpoints to know of
            return
        if isinstance(self._sealer, StoreKeyError):
            log.warning(
                "live endpoints: no usable store key (%s); live endpoints, whose secrets are sealed with it, cannot "
                "be served by this worker (its file's endpoints are)",
                self._sealer,
            )
        await self._sync_all()
        # What was read lives as long as the worker (100,000 endpoints are millions of objects): out of the
        # collector's full scans, which otherwise paused delivery again and again.
        gc.freeze()
        self.current.set()
        self._loops.append(asyncio.create_task(self._refresh_loop(), name="live-endpoints-refresh"))

    async def close(self) -> None:
        """Stop following (the worker is stopping; it stops the runners itself)."""
        self._halted = True
        for task in [*self._loops, *self._tasks]:
            task.cancel()
        for task in [*self._loops, *self._tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def _connect(self) -> bool:
        connection = await connect_once(self.url, name=f"warren-live-{os.getpid()}")
        try:
            exchange, stream = names.endpoints_exchange(self.prefix), names.endpoints_stream(self.prefix)
            if not await all_exist(connection, exchanges=[exchange], queues=[stream]):
                log.warning(
                    "%s and %s do not exist: live endpoints are off until `warren setup` runs (file endpoints are "
                    "served)",
                    exchange,
                    stream,
                )
                self.enabled = False
                await connection.close()
                return False
            self._channel = await connection.channel(publisher_confirms=True)
            queue = await self._channel.declare_queue(
                exclusive=True, auto_delete=True, arguments={"x-queue-type": "classic"}
            )
            await queue.bind(exchange)
            await queue.consume(self._on_message, no_ack=True)  # first, so nothing published while we read is missed
            for record in await read_to_end(connection, self._channel, stream, decode_record):
                self._learn(record)
        except BaseException:
            with contextlib.suppress(Exception):
                await connection.close()
            raise
        self._connection = connection
        connection.close_callbacks.add(self._on_lost)
        return True

    def _on_lost(self, *_: object) -> None:
        if self._halted or self._connection is None:
            return
        self._connection = None
        self.current.clear()
        log.warning("live endpoints lost the RabbitMQ connection; serving the last known configuration; reconnecting")
        self._spawn(self._reconnect())

    async def _reconnect(self) -> None:
        while not self._halted:
            await asyncio.sleep(RECONNECT_DELAY)
            try:
                if not await self._connect():
                    self.current.set()
                    return
            except RECONNECT_FAILURES as exc:
                log.warning("live endpoints: reconnect failed (%s); trying again", exc or type(exc).__name__)
                continue
            log.info("live endpoints reconnected")
            await self._sync_all()
            self.current.set()
            return

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        record = decode_record(message)
        if record is None:
            return
        if self._learn(record):
            self._spawn(self._sync(record.endpoint, message.reply_to))
        elif message.reply_to:  # known already (a file's endpoint, or an older record): nothing to wait for
            self._spawn(self._answer(message.reply_to))

    async def _answer(self, reply_to: str | None) -> None:
        """Tell the announcer that this worker's router has the endpoint in its index (route_fence.py)."""
        channel = self._channel
        if not (self.routes and reply_to) or channel is None:
            return
        with contextlib.suppress(*PUBLISH_FAILURES):  # the announcer has gone: nobody waits any more
            await channel.default_exchange.publish(routed_reply(self.identity), routing_key=reply_to)

    def _learn(self, record: EndpointRecord) -> bool:
        """Keep ``record`` if it is the newest for its endpoint; True when it changed what is known."""
        if record.endpoint in self.file_managed:
            self._file_routing(record)
            if record.endpoint not in self._ignored and record.config is not None:  # not setup's routing record
                self._ignored.add(record.endpoint)
                log.warning("live record of %s ignored: the configuration file manages it", record.endpoint)
            return False
        known = self.known.get(record.endpoint)
        if known is not None and record.version <= known.version:
            return False
        self.known[record.endpoint] = record
        return True

    def _file_routing(self, record: EndpointRecord) -> None:
        """A file endpoint's routing as its newest record says (closed: routed to no more), before it is answered."""
        last = self._file_versions.get(record.endpoint)
        if last is not None and record.version <= last:
            return
        self._file_versions[record.endpoint] = record.version
        self._close_routing(record.endpoint, record.routing_closed)

    async def _sync_all(self) -> None:
        started, before = time.monotonic(), len(self.serving)
        for name in list(self.known):
            await self._sync(name, quiet=True)
        took = (time.monotonic() - started) * 1000
        log.info("live endpoints: %d served (%d before), in %.0f ms", len(self.serving), before, took)

    async def _sync(self, name: str, reply_to: str | None = None, *, quiet: bool = False) -> None:
        """Make the served endpoint ``name`` what its latest record says (one change at a time); then answer
        ``reply_to`` (an announcer waiting for the routers), whatever the outcome: it waits for the router to
        have done what it will do with the record, not for it to succeed. ``quiet``: no line for an endpoint
        served (reading the stream logs one for all: 100,000 lines took seconds)."""
        try:
            await self._sync_locked(name, quiet=quiet)
        finally:
            await self._answer(reply_to)

    async def _sync_locked(self, name: str, *, quiet: bool = False) -> None:
        async with self._lock:
            if self._halted:
                return
            record = self.known.get(name)
            # Before the announcer is answered: no event this router routes after that copies a closed endpoint.
            self._close_routing(name, record is not None and record.routing_closed)
            wanted: Endpoint | None = None
            if record is not None and record.action == APPLY:
                try:
                    wanted = record.endpoint_config(self._sealer)
                except SecretsUnavailable as exc:
                    if self.unopened.get(name) != str(exc):
                        kept = "last configuration kept" if name in self.serving else "not served"
                        log.error("live endpoint %s %s: %s", name, kept, exc, extra={"endpoint": name})
                    self.unopened[name] = str(exc)
                    if name not in self.serving:
                        with contextlib.suppress(ValueError):
                            self._route_unserved(record.endpoint_layout())
                            self._routed_unserved.add(name)
                    return
                except ValueError as exc:
                    log.error("live endpoint %s: record not applied, last configuration kept: %s", name, exc)
                    return
            self.unopened.pop(name, None)
            current = self.serving.get(name)
            if current is None and wanted is None and name in self._routed_unserved:
                self._routed_unserved.discard(name)
                await self._unserve(name)  # routed to without being served here: removed, so no longer
            if current == wanted:
                return
            if current is not None:
                await self._unserve(name)
                del self.serving[name]
                log.info("live endpoint %s: %s", name, "stopped" if wanted is None else "reconfiguring")
            if wanted is not None:
                started = time.monotonic()
                try:
                    await self._serve(wanted)
                except SERVE_FAILURES as exc:
                    # Its queues are not there yet (say, an apply interrupted before it declared them): try again.
                    # A lane endpoint stays routed to meanwhile (Worker.serve_endpoint), its copies waiting.
                    log.error("live endpoint %s not served yet (%s); trying again", name, exc or type(exc).__name__)
                    self._routed_unserved.add(name)
                    self._spawn(self._sync_later(name))
                    return
                self._routed_unserved.discard(name)
                self.serving[name] = wanted
                took = time.monotonic() - started
                if not quiet:
                    log.info(
                        "live endpoint %s: serving (started in %.0f ms)", name, took * 1000, extra={"endpoint": name}
                    )

    async def _sync_later(self, name: str) -> None:
        await asyncio.sleep(RECONNECT_DELAY)
        await self._sync(name)

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_INTERVAL * random.uniform(0.9, 1.1))
            channel = self._channel
            if self._connection is None or channel is None:
                continue
            try:
                for record in list(self.known.values()):
                    if not record.sealed:
                        continue  # never written back with its secrets in plain text
                    await channel.default_exchange.publish(
                        record.to_message(), routing_key=names.endpoints_stream(self.prefix), mandatory=True
                    )
            except PUBLISH_FAILURES as exc:
                log.warning("endpoints stream refresh failed (%s)", exc or type(exc).__name__)

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("live endpoint task failed", exc_info=task.exception())
