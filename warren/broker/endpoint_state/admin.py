"""Operator actions on endpoint state, for ``warren endpoint``: read the fleet's state, pause, disable, enable.

Everything goes through RabbitMQ: the state is read back from the state stream, and a change is published
on the control exchange, so every running worker applies it at once and a worker starting later reads it.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aio_pika.abc import AbstractConnection

from warren.broker.amqp.connection import connect_once
from warren.broker.amqp.probe import QueueProbe
from warren.broker.endpoint_state import circuit
from warren.broker.endpoint_state.operator_events import DISABLED as DISABLED_EVENT
from warren.broker.endpoint_state.operator_events import ENABLED as ENABLED_EVENT
from warren.broker.endpoint_state.operator_events import event_data, event_for, publish_now
from warren.broker.endpoint_state.records import (
    ACTIVE,
    ADMIN,
    CLOSED,
    DISABLED,
    PAUSED,
    EndpointView,
    StateRecord,
    summary,
)
from warren.broker.endpoint_state.stream import StateStore
from warren.core.errors import WarrenError
from warren.topology import names
from warren.topology.config import WarrenConfig

__all__ = ["AdminError", "Change", "change_admin", "open_connection", "read_circuit_states", "read_views", "waiting"]


class AdminError(WarrenError):
    """The requested change does not apply to the endpoint's current state (e.g. resume a disabled one).

    ``text`` says ``{command}`` where the command that does apply goes, and ``command`` holds its words after
    ``warren``: ``str()`` names it bare, and the CLI names it with the --config it was given.
    """

    def __init__(self, text: str, command: tuple[str, ...]) -> None:
        self.text = text
        self.command = command
        super().__init__(self.naming(shlex.join(["warren", *command])))

    def naming(self, command_line: str) -> str:
        """The message, with ``command_line`` as the command to run."""
        return self.text.replace("{command}", command_line)


@contextlib.asynccontextmanager
async def open_connection(config: WarrenConfig, name: str = "warren-endpoint") -> AsyncIterator[AbstractConnection]:
    """A plain connection for one command, with RabbitMQ's absence as a BrokerUnavailable."""
    connection = await connect_once(config.broker.urls, name=name)
    try:
        yield connection
    finally:
        with contextlib.suppress(Exception):
            await connection.close()


async def read_views(connection: AbstractConnection, config: WarrenConfig) -> dict[str, EndpointView]:
    """Every configured endpoint's state as the fleet knows it (endpoints never changed have defaults)."""
    store = StateStore(config.broker.prefix)
    await store.attach(connection)
    try:
        records = await store.load(connection)
    finally:
        await store.detach()  # the connection may be shared and long-lived (the admin API's)
    views = {endpoint.name: EndpointView(endpoint.name) for endpoint in config.endpoints}
    for record in records:
        views.setdefault(record.endpoint, EndpointView(record.endpoint)).apply(record)
    return views


async def read_circuit_states(connection: AbstractConnection, config: WarrenConfig) -> dict[str, str]:
    """Endpoint -> its state in one word (active, paused, disabled, open, half-open, throttled)."""
    now = time.time()
    return {name: summary(view, now)[0] for name, view in (await read_views(connection, config)).items()}


async def waiting(connection: AbstractConnection, config: WarrenConfig, endpoint: str) -> int | None:
    """Messages ready in the endpoint's work or partition queues (parked while it is held), or None if unknown."""
    endpoint_config = config.endpoint(endpoint)
    queues = (
        [names.partition_queue(config.broker.prefix, endpoint, i) for i in range(endpoint_config.partition_count)]
        if endpoint_config.ordering == "key"
        else [names.work_queue(config.broker.prefix, endpoint)]
    )
    total = 0
    probe = QueueProbe(connection)
    try:
        for queue_name in queues:
            depth = await probe.depth(queue_name)
            if depth is None:
                return None
            total += depth.ready
    finally:
        await probe.close()
    return total


@dataclass(frozen=True)
class Change:
    """What a command changed: the records published and the operator event sent, if any."""

    records: tuple[StateRecord, ...]
    event: str | None


def _who() -> str:
    return f"cli@{socket.gethostname()}"


async def change_admin(
    connection: AbstractConnection, config: WarrenConfig, endpoint: str, action: str, reason: str | None = None
) -> Change:
    """``pause``, ``resume``, ``disable`` or ``enable`` an endpoint for the whole fleet.

    ``enable`` lifts a disable or a pause; an open circuit stays open, so the first delivery after it is a
    probe. ``resume`` lifts a pause only: a disabled endpoint needs ``enable``, on purpose.
    """
    config.endpoint(endpoint)  # KeyError for an unknown name: the CLI checks first
    view = (await read_views(connection, config))[endpoint]
    now, by, current = time.time(), _who(), view.admin_state
    if action == "pause":
        if current == DISABLED:
            raise AdminError(f"{endpoint} is disabled; `{{command}}` first", ("endpoint", "enable", endpoint))
        target, text = PAUSED, reason or "paused by an operator"
    elif action == "resume":
        if current == DISABLED:
            raise AdminError(f"{endpoint} is disabled, not paused: use `{{command}}`", ("endpoint", "enable", endpoint))
        target, text = ACTIVE, reason or "resumed by an operator"
    elif action == "disable":
        target, text = DISABLED, reason or "disabled by an operator"
    elif action == "enable":
        target, text = ACTIVE, reason or "enabled by an operator"
    else:
        raise ValueError(f"unknown action {action!r}")
    if current == target:
        return Change((), None)
    records = []
    if action == "enable" and view.circuit_state != CLOSED:
        # Probe first, on a fresh outage clock (else disable_after would disable it again at once).
        records.append(circuit.restarted(view, "enabled by an operator: probing first", now, by))
    admin = view.record(ADMIN, target, text, now, by)
    records.append(admin)
    event = event_for(view, admin)
    store = StateStore(config.broker.prefix)
    await store.attach(connection)
    try:
        for record in records:
            await store.publish(record)
    finally:
        await store.detach()
    if event in (DISABLED_EVENT, ENABLED_EVENT):
        await publish_now(connection, config.broker.prefix, event, event_data(admin, current))
    return Change(tuple(records), event)
