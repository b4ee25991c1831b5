"""``warren endpoint list|show|pause|resume|disable|enable|recover``: endpoint health, read from and written to
RabbitMQ; ``recover`` sends back what failed for good since a moment (its DLQ's letters dead since then).

With a store (``[store] url``) the endpoints created at runtime are listed and changed too, beside the file's
(``create``, ``update``, ``delete``... live in ``endpoint_edit_cmd.py``). The state (circuit, pause, disable,
throttle) lives in RabbitMQ's state stream; a change is published on the control exchange, so it takes effect
on every running worker at once (docs/health.md).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from warren.common import EXIT_USAGE, ConfigOption, command_line, console, err_console, fail, load, run
from warren.core.errors import WarrenError
from warren.core.moments import iso_utc as iso
from warren.core.redact import HIDDEN, redact_url

if TYPE_CHECKING:  # the endpoint states (aio-pika, pydantic) and the configuration load to run, not for --help
    from warren.broker.endpoint_state.admin import AdminError
    from warren.broker.endpoint_state.records import EndpointView, StateRecord
    from warren.topology.config import WarrenConfig

__all__ = ["register"]

endpoint_app = typer.Typer(
    name="endpoint",
    help="Endpoints: state, reason and since when; pause, resume, disable, enable (fleet-wide); recover what "
    "failed since a moment; create, update, delete, rotate-secret, test (with a store).",
    no_args_is_help=True,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
NameArgument = Annotated[str, typer.Argument(help="Endpoint name.")]
ReasonOption = Annotated[str | None, typer.Option("--reason", "-r", help="Why (shown by list and show).")]


def _ago(ts: float | None, now: float) -> str:
    if ts is None:
        return ""
    seconds = max(0, int(now - ts))
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60}s ago"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m ago"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h ago"


def _record(record: StateRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    data: dict[str, Any] = {
        "state": record.state,
        "reason": record.reason,
        "since": iso(record.since),
        "by": record.by,
    }
    if record.opened_at is not None:
        data.update(opened_at=iso(record.opened_at), failed_probes=record.failures)
    if record.retry_at is not None:
        data["next_probe_at"] = iso(record.retry_at)
    if record.until is not None:
        data["until"] = iso(record.until)
    return data


def _row(name: str, view: EndpointView, now: float, parked: int | None, managed: str) -> dict[str, Any]:
    from warren.broker.endpoint_state.records import summary

    state, reason, since = summary(view, now)
    return {
        "endpoint": name,
        "managed_by": managed,
        "state": state,
        "reason": reason,
        "since": iso(since),
        "waiting": parked,
    }


def _load(config: ConfigOption) -> WarrenConfig:
    """The configuration, with the store's endpoints beside the file's when a store is configured."""
    settings = load(config)
    if settings.store.url is None:
        return settings

    import asyncio  # here: `warren --help` need not import asyncio

    from warren.api.admin.service import open_service

    async def stored() -> WarrenConfig:
        async with open_service(settings) as service:
            return await service.with_stored_endpoints()

    try:
        return asyncio.run(stored())
    except WarrenError as exc:
        err_console.print(
            f"[yellow]warning:[/] the store's endpoints are left out: {escape(str(exc))}", highlight=False
        )
        return settings


@endpoint_app.command("list")
def list_endpoints(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Every endpoint, the file's and the live ones (managed by: file or api): its state, why, since when,
    and how many messages wait for it."""
    from warren.broker.endpoint_state.admin import open_connection, read_views, waiting
    from warren.broker.endpoint_state.records import summary
    from warren.broker.live_set import announced_endpoints, managed_by, with_live_endpoints

    file_config = load(config)
    settings = _load(config)

    async def gather() -> list[tuple[str, EndpointView, int | None]]:
        async with open_connection(settings) as connection:
            # The live endpoints as RabbitMQ knows them (what workers serve), with or without a store here.
            everything = with_live_endpoints(settings, await announced_endpoints(connection, settings.broker.prefix))
            views = await read_views(connection, everything)
            return [
                (e.name, views[e.name], await waiting(connection, everything, e.name)) for e in everything.endpoints
            ]

    rows = run(gather())
    now = time.time()
    if as_json:
        typer.echo(
            json.dumps(
                [_row(name, view, now, parked, managed_by(file_config, name)) for name, view, parked in rows],
                indent=2,
            )
        )
        return
    table = Table(show_edge=False, pad_edge=False)
    for column in ("endpoint", "managed by", "state", "since", "reason", "waiting"):
        table.add_column(column, justify="right" if column == "waiting" else "left")
    style = {"active": "green", "throttled": "yellow", "paused": "yellow", "half-open": "yellow"}
    for name, view, parked in rows:
        state, reason, since = summary(view, now)
        table.add_row(
            escape(name),
            managed_by(file_config, name),
            f"[{style.get(state, 'red')}]{state}[/]",
            f"{iso(since)} ({_ago(since, now)})" if since else "",
            escape(reason),
            "?" if parked is None else str(parked),
        )
    console.print(table)


@endpoint_app.command("show")
def show(name: NameArgument, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """One endpoint in detail: admin state, circuit (failed probes, next probe), throttle, limits, queue."""
    from warren.broker.endpoint_state.admin import open_connection, read_views, waiting
    from warren.broker.endpoint_state.records import CLOSED, summary
    from warren.broker.live_set import managed_by
    from warren.commands.endpoint_names import with_endpoint
    from warren.topology.endpoint_headers import hidden_json

    settings = with_endpoint(_load(config), name)

    async def gather() -> tuple[EndpointView, int | None]:
        async with open_connection(settings) as connection:
            return (await read_views(connection, settings))[name], await waiting(connection, settings, name)

    view, parked = run(gather())
    now = time.time()
    endpoint = settings.endpoint(name)
    data = {
        **_row(name, view, now, parked, managed_by(load(config), name)),
        "home": endpoint.home,
        "admin": _record(view.admin),
        "circuit": _record(view.circuit),
        "throttle": _record(view.throttle) if view.throttled_until > now else None,
        "limits": {
            "concurrency": endpoint.concurrency,
            "max_in_flight": endpoint.max_in_flight,
            "rate_limit": endpoint.rate_limit,
            "burst": endpoint.burst,
        },
        "circuit_settings": endpoint.circuit.model_dump(),
        **hidden_json(endpoint.model_dump(mode="json", include={"headers", "proxy"})),  # secret values as ***
        "filter": None if endpoint.filter is None else endpoint.filter.source,
    }
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    state, reason, since = summary(view, now)
    say(f"[bold]{escape(name)}[/] · {escape(redact_url(endpoint.url))}")
    say(f"  home      {endpoint.home}")
    for header in endpoint.headers:
        say(f"  header    {escape(header.name)}: {HIDDEN if header.secret else escape(header.text())}")
    if endpoint.proxy or settings.delivery.proxy:
        say(f"  proxy     {escape(endpoint.proxy or 'default ([delivery] proxy)')}")
    say(f"  state     {state}" + (f" since {iso(since)} ({_ago(since, now)})" if since else ""))
    if reason:
        say(f"  reason    {escape(reason)}")
    decided = view.admin if view.admin is not None and view.admin.state != "active" else view.circuit
    if decided is not None and state != "active":
        say(f"  by        {escape(decided.by)}")
    circuit = view.circuit
    if circuit is not None and circuit.state != CLOSED:
        line = f"  circuit   {circuit.state}, opened {iso(circuit.opened_at)}, {circuit.failures} failed probe(s)"
        if circuit.retry_at:
            line += f", next probe at {iso(circuit.retry_at)}"
        say(line)
    else:
        say("  circuit   closed")
    if view.throttled_until > now:
        say(f"  throttle  until {iso(view.throttled_until)}")
    say(f"  waiting   {'?' if parked is None else parked} message(s)")
    limits = ", ".join(f"{k} {v}" for k, v in data["limits"].items() if v is not None)
    say(f"  limits    {limits}")
    if endpoint.filter is not None:
        say(f"  filter    {escape(json.dumps(endpoint.filter.source))}")


def say(text: str) -> None:
    console.print(text, highlight=False, soft_wrap=True)


def _change(action: str, name: str, config: ConfigOption, reason: str | None) -> None:
    from warren.broker.endpoint_state.admin import AdminError, change_admin, open_connection
    from warren.commands.endpoint_names import with_endpoint

    settings = with_endpoint(_load(config), name)

    async def apply() -> bool | AdminError:
        async with open_connection(settings) as connection:
            try:
                change = await change_admin(connection, settings, name, action, reason)
            except AdminError as exc:
                return exc
            return bool(change.records)

    changed = run(apply())
    if isinstance(changed, AdminError):
        fail(changed.naming(command_line(*changed.command, config=config)))
    past = {"pause": "paused", "resume": "resumed", "disable": "disabled", "enable": "enabled"}[action]
    if not changed:
        console.print(
            f"{escape(name)}: already {'active' if action in ('resume', 'enable') else past}", highlight=False
        )
        return
    effect = {
        "pause": "every worker stops consuming it; its messages wait in RabbitMQ",
        "disable": "every worker stops consuming it; its messages wait in RabbitMQ until it is enabled",
        "resume": "workers consume it again",
        "enable": "workers consume it again (a probe first if its circuit is open)",
    }[action]
    console.print(f"{escape(name)}: {past} — {effect}", highlight=False)


@endpoint_app.command("pause")
def pause(name: NameArgument, config: ConfigOption = None, reason: ReasonOption = None) -> None:
    """Stop delivering to the endpoint on every worker; messages wait in RabbitMQ."""
    _change("pause", name, config, reason)


@endpoint_app.command("resume")
def resume(name: NameArgument, config: ConfigOption = None) -> None:
    """Deliver to a paused endpoint again."""
    _change("resume", name, config, None)


@endpoint_app.command("disable")
def disable(name: NameArgument, config: ConfigOption = None, reason: ReasonOption = None) -> None:
    """Disable the endpoint on every worker (kept across restarts); its messages stay parked."""
    _change("disable", name, config, reason)


@endpoint_app.command("enable")
def enable(name: NameArgument, config: ConfigOption = None) -> None:
    """Enable a disabled (or paused) endpoint; delivery resumes."""
    _change("enable", name, config, None)


@endpoint_app.command("recover")
def recover_failed(
    name: NameArgument,
    since: Annotated[
        str, typer.Option("--since", help="Dead at or after: ISO time (2026-05-01T12:00Z) or ago (15m, 2h, 1d).")
    ],
    config: ConfigOption = None,
) -> None:
    """Send back what failed for good since a moment: the DLQ's letters dead since then, with a fresh budget.

    Each is published to the endpoint again, confirmed, then removed from the DLQ; older ones stay. The admin
    API's POST /v1/endpoints/NAME/recover?since=... does the same.
    """
    from warren.broker.dlq import parse_moment, recover
    from warren.broker.dlq.recover import shared_lanes
    from warren.broker.endpoint_state.admin import open_connection
    from warren.commands.endpoint_names import with_endpoint

    settings = with_endpoint(_load(config), name)
    try:
        since_ms = parse_moment(since, datetime.now(UTC))
    except (ValueError, OverflowError) as exc:
        fail(f"--since: {exc}", EXIT_USAGE)

    async def apply() -> tuple[int, int]:
        async with open_connection(settings) as connection:
            lanes = shared_lanes(settings, settings.endpoint(name).home)
            report = await recover(connection, settings.broker.prefix, name, since_ms, lanes=lanes)
            return report.moved, report.depth

    moved, depth = run(apply())
    say(
        f"{escape(name)}: recovered {moved} dead letter(s) dead since {iso(since_ms / 1000)}; "
        f"{depth - moved} left in its DLQ"
    )


def register(app: typer.Typer) -> None:
    from warren.commands import endpoint_edit_cmd  # it imports this module's helpers

    if not any(command.name == "create" for command in endpoint_app.registered_commands):
        endpoint_edit_cmd.register(endpoint_app)
    app.add_typer(endpoint_app)
