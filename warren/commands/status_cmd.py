"""``warren status``: per endpoint its queues, retries waiting, dead letters, circuit and rates."""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from warren.common import EXIT_USAGE, ConfigOption, console, err_console, fail, load, run
from warren.core.errors import BrokerUnavailable, WarrenError
from warren.topology.durations import parse_duration

if TYPE_CHECKING:  # reading the status (aio-pika, the management API's aiohttp, the configuration) loads to run
    from aio_pika.abc import AbstractConnection

    from warren.broker.status import EndpointStatus, Status
    from warren.topology.config import WarrenConfig

__all__ = ["register", "render_status"]

SOURCES = (
    "ready, consumers, retries and dead letters: exact (AMQP, at this instant); "
    "unacked and rates: management API samples (a few seconds old; rates averaged over {window}s)"
)


# A figure only the management API has, missing: no sample of the queue yet (it answered: a queue just declared
# has none for several seconds), or none at all (unreachable, or no metrics collected: the reason is printed).
NO_SAMPLE = "-"
NOT_KNOWN = "?"


def _rate(value: float | None, missing: str) -> str:
    return missing if value is None else f"{value:.1f}"


def _count(value: int | None, missing: str) -> str:
    return missing if value is None else str(value)


def _endpoint_view(endpoint: EndpointStatus, missing: str) -> RenderableType:
    ordering = "ordered by key" if endpoint.ordering == "key" else "unordered"
    live = " · [cyan]live (api-managed)[/]" if endpoint.managed_by == "api" else ""
    heading = Text.from_markup(
        f"[bold]{escape(endpoint.name)}[/]{live} · {ordering} · state [bold]{escape(endpoint.circuit)}[/] · "
        f"dead letters [bold]{endpoint.dlq.ready}[/]" + ("" if endpoint.dlq.exists else " (DLQ missing)")
    )
    table = Table()
    table.add_column("queue", no_wrap=True)
    for column in ("ready", "unacked", "consumers", "in/s", "acked/s"):
        table.add_column(column, justify="right")
    for queue in endpoint.queues:
        name = queue.name if queue.exists else f"{queue.name} (missing: run warren setup)"
        table.add_row(
            name,
            str(queue.ready),
            _count(queue.unacked, missing),
            str(queue.consumers),
            _rate(queue.in_rate, missing),
            _rate(queue.ack_rate, missing),
        )
    if len(endpoint.queues) > 1:
        table.add_row(
            Text("total", "bold"),
            str(endpoint.ready),
            _count(endpoint.unacked, missing),
            str(endpoint.consumers),
            _rate(endpoint.rate("in_rate"), missing),
            _rate(endpoint.rate("ack_rate"), missing),
        )
    return Group(heading, table)


def _delay_view(status: Status) -> RenderableType:
    """The delay chain's levels holding a message: waiting out their TTL, or held by the level's dead-letter
    worker on their way back (RabbitMQ sends those again every dead_letter_worker_publisher_confirm_timeout)."""
    held = status.retries_held
    heading = Text.from_markup(
        f"delay chain (its queues are shared by all endpoints) · [bold]{status.retries_waiting}[/] retries waiting"
        + (f" · [bold]{held}[/] held by RabbitMQ's dead-letter worker, on their way back" if held else "")
    )
    levels = [level for level in status.delay if level.queue.ready or level.queue.held or not level.queue.exists]
    if not levels:
        return heading
    table = Table()
    table.add_column("level queue", no_wrap=True)
    table.add_column("waits", justify="right")
    table.add_column("messages", justify="right")
    if held:
        table.add_column("held", justify="right")
    for level in levels:
        waits = f"{level.ttl_ms} ms" if level.ttl_ms < 1000 else f"{level.ttl_ms / 1000:g} s"
        cells = [level.queue.name, waits, str(level.queue.ready) if level.queue.exists else "missing"]
        table.add_row(*cells, *([str(level.queue.held or 0)] if held else []))
    return Group(heading, table, Text("(levels holding no message are left out)", "dim"))


def _routing_view(status: Status) -> RenderableType:
    """The lanes' routing stage: events waiting in its partitions to be fanned out, those it gave up on (its DLQ),
    and what waits in the ordered lanes; a queue that does not exist is named with the fix."""
    from warren.broker.status import ORDERED_LANE_ROLE, ROUTE_DLQ_ROLE, ROUTE_PARTITION_ROLE

    groups = (
        ([q for q in status.routing if q.role.startswith(ROUTE_PARTITION_ROLE)], "events waiting"),
        ([q for q in status.routing if q.role == ROUTE_DLQ_ROLE], "dead letters"),
        ([q for q in status.routing if q.role.startswith(ORDERED_LANE_ROLE)], "in the ordered lanes"),
    )
    parts = []
    for queues, what in groups:
        present = [q for q in queues if q.exists]
        if present:
            where = present[0].name if len(present) == 1 else f"{present[0].name} … {present[-1].name}"
            parts.append(f"[bold]{sum(q.ready for q in present)}[/] {what} ({where})")
        parts += [f"{q.name} missing: run warren setup" for q in queues if not q.exists]
    return Text.from_markup("routing stage (lane endpoints) · " + " · ".join(parts))


def render_status(status: Status) -> RenderableType:
    from warren.broker.dlq.letters import format_ms
    from warren.broker.status import RATE_WINDOW

    head = Text(
        f"Warren status · vhost {status.vhost!r} · prefix {status.prefix!r} · {format_ms(status.taken_at_ms)}",
        "bold",
    )
    parts: list[RenderableType] = [head, Text()]
    missing = NOT_KNOWN if status.management_error else NO_SAMPLE  # `?` always comes with its reason, below
    for endpoint in status.endpoints:
        parts += [_endpoint_view(endpoint, missing), Text()]
    if status.routing:
        parts += [_routing_view(status), Text()]
    parts += [_delay_view(status), Text()]
    note = SOURCES.format(window=RATE_WINDOW)
    if status.management_error:
        note += f"\n{NOT_KNOWN}: unacked counts and rates unavailable: {status.management_error}"
    parts.append(Text(note, "dim"))
    return Group(*parts)


async def _states(connection: AbstractConnection, config: WarrenConfig) -> dict[str, str]:
    """Each endpoint's health as the fleet's state stream holds it; none (shown n/a) when it cannot be read."""
    from warren.broker.endpoint_state.admin import read_circuit_states

    try:
        return await read_circuit_states(connection, config)
    except WarrenError:
        return {}  # e.g. a topology declared before endpoint health existed: `warren setup` adds the stream


async def _snapshot(config: WarrenConfig, endpoints: list[str] | None) -> Status:
    """The file's endpoints and the live ones (the endpoints stream: those created through the admin API)."""
    from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS, connect_once, link_lost
    from warren.broker.live_set import announced_endpoints, with_live_endpoints
    from warren.broker.management import ManagementClient
    from warren.broker.status import collect_status

    connection = await connect_once(config.broker.urls, name="warren-status")
    try:
        live = await announced_endpoints(connection, config.broker.prefix)
        everything = with_live_endpoints(config, live)
        states = await _states(connection, everything)
        file_names = {e.name for e in config.endpoints}
        async with ManagementClient.from_settings(config.broker) as api:
            return await collect_status(
                everything, connection, api, endpoints, states, live=[n for n in live if n not in file_names]
            )
    except CONNECTION_EXCEPTIONS as exc:
        raise BrokerUnavailable(f"connection to RabbitMQ lost: {exc or type(exc).__name__}") from exc
    except RuntimeError as exc:
        if not link_lost(exc):
            raise
        raise BrokerUnavailable(f"connection to RabbitMQ lost: {exc}") from exc
    finally:
        await connection.close()


async def _round(config: WarrenConfig, endpoints: list[str] | None) -> Status | str:
    """One refresh of a watch: the status, or why there is none this time (the watch goes on: RabbitMQ restarting,
    a node down, is what an operator watches for)."""
    try:
        return await _snapshot(config, endpoints)
    except WarrenError as exc:
        return str(exc)


async def _watch(config: WarrenConfig, endpoints: list[str] | None, interval: float, as_json: bool) -> None:
    # Each round asks whether Ctrl-C came: a library may lose its CancelledError (warren/deadlines.py).
    import asyncio  # here: `warren --help` need not import asyncio

    from warren.broker.status import Status
    from warren.core.deadlines import stop_if_cancelled

    retrying = f"(trying again every {interval:g}s)"
    if as_json:
        while True:  # one JSON document per line on stdout, until interrupted; a failed refresh on stderr
            status = await _round(config, endpoints)
            if isinstance(status, Status):
                typer.echo(json.dumps(status.to_json()))
            else:
                err_console.print(f"[bold red]error:[/] {escape(status)} {retrying}", highlight=False)
            await asyncio.sleep(interval)
            stop_if_cancelled()
    with Live(console=console, auto_refresh=False, screen=False) as live:
        while True:
            status = await _round(config, endpoints)
            if isinstance(status, Status):
                live.update(render_status(status), refresh=True)
            else:
                live.update(Text(f"error: {status} {retrying}", "bold red"), refresh=True)
            await asyncio.sleep(interval)
            stop_if_cancelled()


def status(
    config: ConfigOption = None,
    endpoints: Annotated[
        str | None, typer.Option("--endpoints", "-e", help="Comma-separated endpoint names (default: all).")
    ] = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until interrupted.")] = False,
    interval: Annotated[str, typer.Option("--interval", help="Refresh period with --watch.")] = "2s",
    as_json: Annotated[
        bool, typer.Option("--json", help="JSON on stdout (one document per line with --watch).")
    ] = False,
) -> None:
    """Show each endpoint's queues, retries waiting, dead letters, circuit and rates (live endpoints too)."""
    cfg = load(config)
    names = [n.strip() for n in endpoints.split(",") if n.strip()] if endpoints else None
    unknown = [n for n in names or () if n not in {e.name for e in cfg.endpoints}]
    if unknown:  # not in the file: live ones, perhaps (read from RabbitMQ only then)
        from warren.broker.live_set import read_live_endpoints

        live = run(read_live_endpoints(cfg))
        unknown = [n for n in unknown if n not in live]
    if unknown:
        fail(f"unknown endpoint(s): {', '.join(unknown)}", EXIT_USAGE)
    try:
        period = parse_duration(interval)
    except ValueError as exc:
        fail(f"--interval: {exc}", EXIT_USAGE)
    if period <= 0:
        fail("--interval must be positive", EXIT_USAGE)
    if watch:
        with contextlib.suppress(KeyboardInterrupt):
            run(_watch(cfg, names, period, as_json))
        return
    snapshot = run(_snapshot(cfg, names))
    if as_json:
        typer.echo(json.dumps(snapshot.to_json(), indent=2))
    else:
        console.print(render_status(snapshot))


def register(app: typer.Typer) -> None:
    app.command("status")(status)
