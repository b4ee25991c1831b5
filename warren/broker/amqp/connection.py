"""Connecting to RabbitMQ: one node or a cluster's nodes, with failures mapped to BrokerUnavailable in one place.

Every connection Warren makes (worker, publisher, ``warren api``, CLI commands) comes from ``connect`` or
``connect_once``, which take one URL or a list of a cluster's nodes. The list is shuffled per connection, so
that a fleet spreads over the nodes, and the first node that opens wins. A robust connection that later loses
its node reconnects to the next one in its order, one node per attempt, round and round (aio-pika's robust
connection knows one URL: ``_RobustConnection`` swaps it before each attempt).

A vhost that does not exist (or that the user may not use) is refused while the connection opens: RabbitMQ
answers ``connection.open`` with ``connection.close`` (530 NOT_ALLOWED), which aiormq reports as an
InvalidFrameError and a long traceback. ``open_failure`` turns it into one line naming the vhost.

Both ask for a heartbeat of ``HEARTBEAT`` seconds unless the URL names one (``?heartbeat=N``): aiormq gives
up on a connection after three heartbeat periods without a frame, so with RabbitMQ's 60 s a node that stops
answering without closing its links (paused by the OS, a VM migrated, cut off by a network fault that drops
rather than resets) held every connection on it for about three minutes; at 10 s one moves on within about 33 s.

Both install the aiormq close-ok workaround (``close_ok.answer_every_channel_close``) and the one-close fix
(``close_once.close_once``), both idempotent, before they open anything: explicitly, where every connection is
made, rather than as a side effect of an import.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import socket
import weakref
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractRobustConnection
from yarl import URL

from warren.broker.amqp.cancelled_consumers import ReportingChannel
from warren.broker.amqp.close_ok import answer_every_channel_close
from warren.broker.amqp.close_once import close_once
from warren.broker.amqp.uninterrupted import uninterrupted
from warren.core.deadlines import within
from warren.core.errors import BrokerUnavailable, describe
from warren.core.redact import redact_url

__all__ = [
    "CONNECTION_EXCEPTIONS",
    "HEARTBEAT",
    "OPEN_EXCEPTIONS",
    "Nodes",
    "closing",
    "connect",
    "connect_once",
    "current_node",
    "link_lost",
    "node_order",
    "nodes_text",
    "open_failure",
    "redact_url",
    "with_heartbeat",
]

# One node's URL, or the URLs of a cluster's nodes (``BrokerSettings.urls``).
Nodes = str | Sequence[str]

log = logging.getLogger("warren.broker")

# A robust channel is reopened, with its consumers, when its connection comes back and when RabbitMQ closed that
# one channel (a channel error), and a close that lands while that reopen is under way does not stick: aio-pika's
# reopen clears the channel's closed state after the close has set it. A consumer nobody reads would then hold
# its messages unacked, or stay a partition's single active consumer for good (a node-kill run left a partition
# stuck so). So a channel closed for good (broker/amqp/channels.py marks it) is closed again whenever a reopen of it
# ends: aio-pika runs the channel's ``reopen_callbacks`` at the end of every reopen, on either path.
_CLOSED: weakref.WeakSet[AbstractChannel] = weakref.WeakSet()
_CLOSING_AGAIN: set[asyncio.Task[None]] = set()
REOPENED_CLOSE_TIMEOUT = 5.0  # seconds one such close may take


def closing(channel: AbstractChannel) -> None:
    """Record that ``channel`` is being closed for good: a reopen that restores it closes it again."""
    if channel in _CLOSED:
        return
    _CLOSED.add(channel)
    callbacks = getattr(channel, "reopen_callbacks", None)  # robust channels only: others are never reopened
    if callbacks is not None:
        callbacks.add(_reopened)


def _reopened(channel: AbstractChannel) -> None:
    # Inside the reopen (under the channel's restore lock): the close runs as a task of its own once it is over.
    log.warning("channel %s was closed while it was being reopened, and came back: closing it again", channel.number)
    task = asyncio.get_running_loop().create_task(_close_again(channel), name="warren-close-reopened")
    _CLOSING_AGAIN.add(task)
    task.add_done_callback(_CLOSING_AGAIN.discard)


async def _close_again(channel: AbstractChannel) -> None:
    with contextlib.suppress(Exception):
        await within(uninterrupted(channel.close(), grace=0), REOPENED_CLOSE_TIMEOUT)


# Failures after which trying again later can succeed: the link or the broker, not our request.
CONNECTION_EXCEPTIONS: tuple[type[Exception], ...] = (
    aiormq.exceptions.AMQPConnectionError,
    aiormq.exceptions.ChannelInvalidStateError,
    ConnectionError,
    asyncio.TimeoutError,
    socket.gaierror,
)


def link_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the link to RabbitMQ went away under a command (a timeout is not counted: it may be
    the management API's). aiormq has no type for opening a channel on a connection that closed meanwhile (a
    broker restart): it raises ``RuntimeError("<Connection: ...> closed")``."""
    if isinstance(exc, CONNECTION_EXCEPTIONS) and not isinstance(exc, asyncio.TimeoutError):
        return True
    return isinstance(exc, RuntimeError) and str(exc).startswith("<Connection") and str(exc).endswith(" closed")


# How long a connection whose first connect failed may take to close (it never opened: nothing to flush).
ABANDON_TIMEOUT = 2.0

# What opening a connection can raise besides a broken link: the broker closing it instead of opening it.
OPEN_EXCEPTIONS: tuple[type[Exception], ...] = (*CONNECTION_EXCEPTIONS, aiormq.exceptions.InvalidFrameError)


def open_failure(url: str, exc: Exception) -> BrokerUnavailable:
    """The one-line error for a connection that could not be opened (see the module docstring)."""
    if isinstance(exc, aiormq.exceptions.InvalidFrameError) and "Connection.Close" in str(exc):
        parts = urlsplit(url)
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        user = unquote(parts.username) if parts.username else "guest"
        return BrokerUnavailable(
            f"RabbitMQ at {redact_url(url)} refused to open vhost '{vhost}': it does not exist, or user '{user}' "
            f"may not use it; create it (`rabbitmqctl add_vhost {vhost}`, then `rabbitmqctl set_permissions -p "
            f"{vhost} {user} '.*' '.*' '.*'`) or fix the vhost in broker.url"
        )
    return BrokerUnavailable(f"cannot connect to RabbitMQ at {redact_url(url)}: {describe(exc)}")


HEARTBEAT = 10  # seconds; a connection silent for 3 periods (33 s) is lost (see the module docstring)


def with_heartbeat(url: str) -> URL:
    """``url`` asking for a ``HEARTBEAT`` s heartbeat, unless it names its own (``?heartbeat=N``, 0 for none)."""
    parsed = URL(url)
    return parsed if "heartbeat" in parsed.query else parsed.update_query(heartbeat=HEARTBEAT)


def node_order(nodes: Nodes, rng: random.Random | None = None) -> list[str]:
    """The nodes in the order one connection tries them: shuffled, so that a fleet spreads over the cluster."""
    order = [nodes] if isinstance(nodes, str) else list(nodes)
    (rng or random).shuffle(order)
    return order


def current_node(connection: AbstractConnection) -> str:
    """The node a connection is on now, credentials hidden (it changes when a robust connection fails over)."""
    return redact_url(str(getattr(connection, "url", "?")))


def nodes_text(nodes: Nodes) -> str:
    """The nodes for a message, credentials hidden: ``amqp://***@h1:5672/`` or ``any of [..., ...]``."""
    if isinstance(nodes, str) or len(nodes) == 1:
        return redact_url(nodes if isinstance(nodes, str) else nodes[0])
    return "any of [" + ", ".join(redact_url(url) for url in nodes) + "]"


_MISSING_QUEUE = re.compile(r"no queue '(.*)' in vhost")


class _RobustChannel(ReportingChannel):
    """aio-pika's robust channel, restored without a queue that is gone rather than failing its connection's
    reconnect.

    On a reconnect aio-pika restores every channel with the queues declared on it. One whose queue is gone by
    then (deleted while the link was down, or while its consumer waited for it) fails with NOT_FOUND, and
    aio-pika closes the new connection and tries again, every ``reconnect_interval``, for ever: every channel of
    the process then fails with "closed" until a restart (aio-pika 10.2.1; issue 34). Such a queue is left out
    of the restore and kept: its consumer is then one RabbitMQ cancelled, which aio-pika consumes again, with the
    same tag, once the queue exists (it probes it every ``reconnect_interval``). A NOT_FOUND that names no queue
    of the channel closes the channel instead. (aio-pika retries a NOT_FOUND after the other channels, for a
    queue bound to an exchange another channel declares: no channel of Warren's declares an exchange.)
    """

    async def restore(self, channel: Any = None) -> None:
        missing: dict[str, Any] = {}
        try:
            while True:
                try:
                    await super().restore()
                    return
                except aiormq.exceptions.ChannelNotFoundEntity as exc:
                    found = _MISSING_QUEUE.search(str(exc))
                    name = found.group(1) if found else None
                    if name is None or name not in self._queues or name in missing:
                        log.warning("on reconnect: %s; that channel is closed", describe(exc))
                        closing(self)
                        with contextlib.suppress(Exception):
                            await self.close()
                        return
                    log.warning("on reconnect: queue %s is missing; consumed again once it exists", name)
                    missing[name] = self._queues.pop(name)
        finally:
            for name, queues in missing.items():
                self._queues[name] |= queues
            if missing and isinstance(self._connection, aio_pika.RobustConnection):
                self._connection._request_recovery()  # its probe of what is missing, every reconnect_interval


class _RobustConnection(aio_pika.RobustConnection):
    """aio-pika's robust connection, failing over between nodes, and closed when its first connect fails.

    aio-pika reconnects to ``self.url`` and, before each attempt, sets ``transport`` to None (version pinned in
    constraints.txt; tests/broker/test_connection_failover.py holds it to that): once the first connect has
    succeeded, each such attempt moves ``self.url`` to the next node, so a dead node is left at once and a
    second dead one costs one ``reconnect_interval``.

    aio-pika starts a reconnecting task on the first connect and leaves it running when that connect is cancelled
    (it logs "cancelled. Reconnecting" and swallows further cancellations): a process told to stop while
    RabbitMQ hangs its handshake would then never exit.

    Its channels log a consumer RabbitMQ cancelled (its queue deleted) and its return (cancelled_consumers.py).
    """

    CHANNEL_CLASS = _RobustChannel

    def __init__(self, url: URL, *, nodes: Sequence[str] = (), **kwargs: Any) -> None:
        self._nodes = [URL(node) for node in nodes] or [URL(url)]
        self._node = 0
        self._opened_once = False
        super().__init__(url, **kwargs)

    @property
    def transport(self) -> Any:
        return self.__dict__.get("_transport")

    @transport.setter
    def transport(self, value: Any) -> None:
        if value is None and self.__dict__.get("_opened_once") and not self._close_called:
            self._node = (self._node + 1) % len(self._nodes)
            self.url = self._nodes[self._node]
        self.__dict__["_transport"] = value

    async def _on_connected(self) -> None:
        await super()._on_connected()
        self._opened_once = True

    async def connect(self, timeout: float | None = None) -> None:
        try:
            await super().connect(timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await within(asyncio.shield(self.close()), ABANDON_TIMEOUT)
            raise


def _unavailable(order: Sequence[str], failures: list[tuple[str, Exception]]) -> BrokerUnavailable:
    """One node: its own message. Several: the vhost refusal if any node gave it, else every node's failure."""
    if len(failures) == 1:
        return open_failure(*failures[0])
    for url, exc in failures:
        if isinstance(exc, aiormq.exceptions.InvalidFrameError):
            return open_failure(url, exc)
    reasons = "; ".join(f"{redact_url(url)}: {describe(exc)}" for url, exc in failures)
    return BrokerUnavailable(f"cannot connect to RabbitMQ at any of {len(order)} nodes ({reasons})")


async def connect(url: Nodes, *, name: str = "warren", timeout: float = 10.0) -> AbstractRobustConnection:
    """A robust connection to the first node of ``url`` (one URL or a list) that opens, in a shuffled order;
    after that it reconnects by itself, to the next node when its own is gone, and re-declares consumers."""
    answer_every_channel_close()
    close_once()
    order = node_order(url)
    failures: list[tuple[str, Exception]] = []
    for index, node in enumerate(order):
        connection = _RobustConnection(
            with_heartbeat(node),
            nodes=[str(with_heartbeat(n)) for n in order[index:] + order[:index]],
            client_properties={"connection_name": name},
        )
        try:
            await connection.connect(timeout)
        except OPEN_EXCEPTIONS as exc:
            failures.append((node, exc))
            continue
        return connection
    raise _unavailable(order, failures) from failures[-1][1]


async def connect_once(url: Nodes, *, name: str = "warren", timeout: float = 10.0) -> AbstractConnection:
    """A plain connection for one command (``warren dlq``, ``warren status``), to the first node that opens.

    A lost link fails the command, which then says to run it again; a robust connection would restore it
    behind the command's back and re-create consumers on channels the command no longer tracks.
    """
    answer_every_channel_close()
    close_once()
    order = node_order(url)
    failures: list[tuple[str, Exception]] = []
    for node in order:
        try:
            return await aio_pika.connect(
                with_heartbeat(node), timeout=timeout, client_properties={"connection_name": name}
            )
        except OPEN_EXCEPTIONS as exc:
            failures.append((node, exc))
    raise _unavailable(order, failures) from failures[-1][1]
