"""``warren dlq list|show|replay|purge``: see what is stuck and why, bring it back, or let it go."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from aio_pika.abc import AbstractConnection
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS, connect_once
from warren.broker.amqp.probe import QueueProbe, missing
from warren.broker.dlq import (
    MAX_SCAN,
    DeadLetter,
    Selection,
    browse,
    delivery_limit,
    dlq_route,
    move_selected,
    parse_moment,
    purge_dlq,
    purge_selected,
    replay_by_shovel,
    select,
)
from warren.broker.dlq.recover import shared_lanes
from warren.broker.dlq.shovel import shovel_name_stem
from warren.broker.management import ManagementClient
from warren.commands.dlq_render import letter_detail, letters_table, moves_table, type_counts
from warren.commands.endpoint_names import with_endpoint
from warren.common import EXIT_USAGE, ConfigOption, command_line, console, err_console, fail, load, run
from warren.core.errors import BrokerUnavailable, ManagementError, TopologyError
from warren.core.visible import visible
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.durations import parse_duration
from warren.topology.planner import DELIVERY_LIMIT

__all__ = ["register"]

T = TypeVar("T")

dlq_app = typer.Typer(
    name="dlq",
    help="Inspect, replay and purge the endpoints' dead-letter queues.",
    no_args_is_help=True,
)

EndpointArg = Annotated[
    str,
    typer.Argument(help="Endpoint name: one of the configuration file, or a live one; '(route)': the routing stage."),
]
TypeOpt = Annotated[
    list[str] | None,
    typer.Option("--type", "-t", help="Event type or pattern ('order.*', 'order.#'); repeat for several."),
]
SinceOpt = Annotated[
    str | None, typer.Option("--since", help="Dead at or after: ISO time (2024-05-01T12:00Z) or ago (15m, 2h).")
]
UntilOpt = Annotated[str | None, typer.Option("--until", help="Dead before: ISO time or ago.")]
LimitOpt = Annotated[int | None, typer.Option("--limit", "-n", min=1, help="At most this many messages.")]
NewestOpt = Annotated[bool, typer.Option("--newest", help="Newest first (default: oldest first, the queue's order).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
ScanOpt = Annotated[
    int, typer.Option("--scan", min=1, max=MAX_SCAN, help="Read at most this many messages from the queue's head.")
]


def _selection(
    types: list[str] | None,
    since: str | None,
    until: str | None,
    ids: str | None,
    limit: int | None,
    endpoint: str | None = None,
) -> Selection:
    now = dt.datetime.now(dt.UTC)
    try:
        since_ms = parse_moment(since, now) if since else None
        until_ms = parse_moment(until, now) if until else None
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    id_set = frozenset(i.strip() for i in ids.split(",") if i.strip()) if ids is not None else None
    if ids is not None and not id_set:
        fail("--ids needs at least one event id (comma-separated)", EXIT_USAGE)
    return Selection(tuple(types or ()), since_ms, until_ms, id_set, limit, endpoint)


async def _with_broker(config: WarrenConfig, work: Callable[[AbstractConnection], Awaitable[T]]) -> T:
    """Run ``work`` on a fresh connection; a link lost half-way becomes one clear line, not a traceback."""
    connection = await connect_once(config.broker.urls, name="warren-dlq")
    try:
        return await work(connection)
    except CONNECTION_EXCEPTIONS as exc:
        raise BrokerUnavailable(f"connection to RabbitMQ lost: {exc or type(exc).__name__}") from exc
    finally:
        await connection.close()


async def _guard_delivery_limit(config: WarrenConfig, queue: str, path: Path | None) -> None:
    """Refuse to read a DLQ whose delivery limit is below Warren's: every read counts as a delivery there.

    Warren's own limit (2^31-1) cannot run out by reading (warren/broker/dlq/browse.py); a lower one can.
    """
    try:
        async with ManagementClient.from_settings(config.broker) as api:
            limit = await delivery_limit(api, queue)
    except ManagementError as exc:
        err_console.print(f"note: could not check {queue} for a delivery limit ({exc})", highlight=False)
        return
    if limit is not None and limit < DELIVERY_LIMIT:
        fail(
            f"{queue} has a delivery limit of {limit} (its argument, a policy, or RabbitMQ 4.x's default): each "
            "read returns every message once and counts as a delivery, so reading it would eventually drop "
            f"messages. Run `{command_line('setup', config=path)}` (it gives Warren's queues a limit of 2^31-1), "
            "and remove any lower delivery-limit policy that matches the DLQ."
        )


def _lanes(config: WarrenConfig, name: str) -> int:
    """The lane count when ``name`` is a lane endpoint (its letters are in its lane's shared DLQ), else 0.

    ``(route)`` names the routing stage: its DLQ holds the events it could not fan out (lanes on only)."""
    if name == names.ROUTE_STAGE:
        if not config.lanes.count:
            fail(f"{name!r} is the shared lanes' routing stage, and lanes are off here ([lanes] count = 0)", EXIT_USAGE)
        return 0
    holding = with_endpoint(config, name)
    return shared_lanes(holding, holding.endpoint(name).home)


async def _read(
    config: WarrenConfig, endpoint: str, scan: int, path: Path | None, lanes: int = 0
) -> tuple[list[DeadLetter], int]:
    queue = dlq_route(config.broker.prefix, endpoint, lanes)[0]
    await _guard_delivery_limit(config, queue, path)
    return await _with_broker(config, lambda c: browse(c, queue, scan=scan))


def _scan_note(read: int, depth: int) -> str:
    return f" (only the first {read} of {depth} were read: add --scan {min(depth, MAX_SCAN)})" if read < depth else ""


@dlq_app.command("list")
def list_letters(
    endpoint: EndpointArg,
    config: ConfigOption = None,
    limit: LimitOpt = None,
    types: TypeOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    newest: NewestOpt = False,
    as_json: JsonOpt = False,
    scan: ScanOpt = MAX_SCAN,
) -> None:
    """List an endpoint's dead letters without removing or reordering any."""
    cfg = load(config)
    name = endpoint
    lanes = _lanes(cfg, name)
    selection = _selection(types, since, until, None, limit, name if lanes else None)
    letters, depth = run(_read(cfg, name, scan, config, lanes))
    chosen = select(letters, selection, newest_first=newest)
    if as_json:
        typer.echo(json.dumps([letter.summary() for letter in chosen], indent=2, ensure_ascii=False))
        return
    queue = dlq_route(cfg.broker.prefix, name, lanes)[0]
    order = "newest first" if newest else "oldest first"
    console.print(letters_table(chosen, f"{queue} · {order}", console.width))
    console.print(f"{len(chosen)} shown of {depth} dead letter(s){_scan_note(len(letters), depth)}", highlight=False)


@dlq_app.command("show")
def show_letter(
    endpoint: EndpointArg,
    event_id: Annotated[str, typer.Argument(help="The event id (the webhook-id).")],
    config: ConfigOption = None,
    as_json: JsonOpt = False,
    scan: ScanOpt = MAX_SCAN,
) -> None:
    """Print one dead letter whole: headers, envelope, attempt history."""
    cfg = load(config)
    name = endpoint
    lanes = _lanes(cfg, name)
    letters, depth = run(_read(cfg, name, scan, config, lanes))
    found = [x for x in letters if x.event_id == event_id and (not lanes or x.endpoint == name)]
    if not found:
        queue = dlq_route(cfg.broker.prefix, name, lanes)[0]
        fail(f"no dead letter {visible(event_id)} in {queue}{_scan_note(len(letters), depth)}")
    if as_json:
        document = [letter.whole() for letter in found]
        typer.echo(json.dumps(document[0] if len(document) == 1 else document, indent=2, ensure_ascii=False))
        return
    for index, letter in enumerate(found, 1):
        console.print(letter_detail(letter, index, len(found)))


def _progress() -> Progress:
    return Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,  # piped or captured: the final line says it all
    )


async def _replay_filtered(
    config: WarrenConfig,
    endpoint: str,
    selection: Selection,
    newest: bool,
    dry_run: bool,
    scan: int,
    path: Path | None,
    lanes: int = 0,
) -> None:
    prefix = config.broker.prefix
    queue, exchange, lane = dlq_route(prefix, endpoint, lanes)
    await _guard_delivery_limit(config, queue, path)
    with _progress() as progress:
        task = progress.add_task("replay", total=None)

        async def work(connection: AbstractConnection) -> tuple[int, int, list[DeadLetter], int]:
            report = await move_selected(
                connection,
                prefix,
                endpoint,
                selection,
                newest_first=newest,
                dry_run=dry_run,
                scan=scan,
                on_moved=lambda _: progress.advance(task),
                lanes=lanes,
            )
            return report.depth, report.scanned, report.chosen, report.moved

        if dry_run:
            progress.update(task, visible=False)
        depth, scanned, chosen, moved = await _with_broker(config, work)
        progress.update(task, total=len(chosen))
    exchange = lane or exchange
    if dry_run:
        console.print(moves_table(chosen, f"would replay to {exchange}", console.width))
        console.print(
            f"dry run: {len(chosen)} of {depth} dead letter(s) would be replayed client-side"
            + (f" ({type_counts(chosen)})" if chosen else "")
            + _scan_note(scanned, depth),
            highlight=False,
        )
        return
    console.print(
        f"replayed {moved} dead letter(s) of {endpoint} to {exchange} (client-side, each confirmed before its DLQ "
        f"copy was removed); {depth - moved} left in {queue}{_scan_note(scanned, depth)}",
        highlight=False,
    )


async def _replay_all(config: WarrenConfig, endpoint: str, dry_run: bool, timeout: float, path: Path | None) -> None:
    prefix = config.broker.prefix
    queue = names.dlq(prefix, endpoint)
    exchange = names.endpoint_exchange(prefix, endpoint)
    if dry_run:
        await _guard_delivery_limit(config, queue, path)
        letters, depth = await _with_broker(config, lambda c: browse(c, queue))
        console.print(
            f"dry run: {depth} dead letter(s) would be moved from {queue} to {exchange} by a shovel "
            f"{shovel_name_stem(prefix, endpoint)}.<run id>" + (f" ({type_counts(letters)})" if letters else ""),
            highlight=False,
        )
        return
    async with ManagementClient.from_settings(config.broker) as api:
        with _progress() as progress:
            task = progress.add_task("replay", total=None)

            def advance(moved: int, total: int) -> None:
                progress.update(task, completed=moved, total=total)

            report = await _with_broker(
                config, lambda c: replay_by_shovel(c, api, prefix, endpoint, timeout=timeout, on_progress=advance)
            )
    if report.moved == 0 and not report.resumed:
        console.print(f"nothing to replay: {queue} is empty", highlight=False)
        return
    how = "an earlier run's shovel, watched to its end," if report.resumed else "a shovel"
    console.print(
        f"replayed {report.moved} dead letter(s) of {endpoint} from {queue} to {exchange} through {how} "
        f"in {report.seconds:.1f}s; shovel {report.name} removed; {report.remaining} in the "
        "DLQ now",
        highlight=False,
    )


@dlq_app.command("replay")
def replay(
    endpoint: EndpointArg,
    config: ConfigOption = None,
    types: TypeOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    ids: Annotated[str | None, typer.Option("--ids", help="Comma-separated event ids.")] = None,
    limit: LimitOpt = None,
    newest: NewestOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would move; move nothing.")] = False,
    timeout: Annotated[
        str, typer.Option("--timeout", help="Stop watching the shovel after this long (it carries on).")
    ] = "10m",
    scan: ScanOpt = MAX_SCAN,
) -> None:
    """Send dead letters back for delivery with a fresh retry budget.

    Without filters the whole DLQ moves inside RabbitMQ through a dynamic shovel.

    With --type, --since, --until, --ids or --limit, each chosen message is published, confirmed, then removed.

    An interrupted replay loses nothing (at worst a duplicate): run it again.
    """
    cfg = load(config)
    name = endpoint
    lanes = _lanes(cfg, name)
    selection = _selection(types, since, until, ids, limit)
    try:
        seconds = parse_duration(timeout)
    except ValueError as exc:
        fail(f"--timeout: {exc}", EXIT_USAGE)
    if selection.narrows or newest or lanes or name == names.ROUTE_STAGE:  # a lane's DLQ is shared: never shovelled
        run(_replay_filtered(cfg, name, selection, newest, dry_run, scan, config, lanes))
    else:
        run(_replay_all(cfg, name, dry_run, seconds, config))


async def _dlq_depth(config: WarrenConfig, endpoint: str) -> int:
    queue = dlq_route(config.broker.prefix, endpoint)[0]

    async def depth(connection: AbstractConnection) -> int:
        probe = QueueProbe(connection)
        try:
            found = await probe.depth(queue)
        finally:
            await probe.close()
        if found is None:
            raise TopologyError(missing("queue", queue))
        return found.ready

    return await _with_broker(config, depth)


@dlq_app.command("purge")
def purge(
    endpoint: EndpointArg,
    config: ConfigOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete every dead letter of an endpoint for good (asks first)."""
    cfg = load(config)
    name = endpoint
    lanes = _lanes(cfg, name)
    if lanes:
        _purge_lane_letters(cfg, name, lanes, yes)
        return
    queue = dlq_route(cfg.broker.prefix, name)[0]
    if not yes:
        depth = run(_dlq_depth(cfg, name))
        if depth == 0:
            console.print(f"nothing to purge: {queue} is empty", highlight=False)
            return
        if not typer.confirm(f"Delete {depth} dead letter(s) from {queue} for good?", err=True):
            fail("purge cancelled: nothing deleted")
    purged = run(_with_broker(cfg, lambda c: purge_dlq(c, cfg.broker.prefix, name)))
    console.print(f"purged {purged} dead letter(s) from {queue}", highlight=False)


def _purge_lane_letters(cfg: WarrenConfig, name: str, lanes: int, yes: bool) -> None:
    """A lane endpoint's letters out of its lane's shared DLQ; every other endpoint's stay, in order."""
    queue = dlq_route(cfg.broker.prefix, name, lanes)[0]
    if not yes and not typer.confirm(f"Delete the dead letters of {name} from {queue} for good?", err=True):
        fail("purge cancelled: nothing deleted")
    selection = Selection(endpoint=name)
    purged, depth = run(_with_broker(cfg, lambda c: purge_selected(c, queue, selection)))
    console.print(f"purged {purged} dead letter(s) of {name} from {queue}; {depth - purged} left", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``dlq`` group to the main CLI."""
    app.add_typer(dlq_app, name="dlq")
