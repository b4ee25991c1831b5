"""``warren dlq list|show|replay|purge``: see what is stuck and why, bring it back, or let it go."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Annotated

import typer

from warren.broker.amqp.limits import MAX_PREFETCH
from warren.common import EXIT_USAGE, ConfigOption, console, fail, load, run
from warren.core.visible import visible
from warren.topology import names
from warren.topology.durations import parse_duration

if TYPE_CHECKING:  # reading and moving dead letters (aio-pika, aiohttp, the configuration) loads to run, not for --help
    from warren.broker.dlq import Selection
    from warren.topology.config import WarrenConfig

__all__ = ["register"]

MAX_SCAN = MAX_PREFETCH  # warren.broker.dlq.MAX_SCAN, the most one read takes

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
    from warren.broker.dlq import Selection, parse_moment

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


def _lanes(config: WarrenConfig, name: str) -> int:
    """The lane count when ``name`` is a lane endpoint (its letters are in its lane's shared DLQ), else 0.

    ``(route)`` names the routing stage: its DLQ holds the events it could not fan out (lanes on only)."""
    from warren.broker.dlq.recover import shared_lanes
    from warren.commands.endpoint_names import with_endpoint

    if name == names.ROUTE_STAGE:
        if not config.lanes.count:
            fail(f"{name!r} is the shared lanes' routing stage, and lanes are off here ([lanes] count = 0)", EXIT_USAGE)
        return 0
    holding = with_endpoint(config, name)
    return shared_lanes(holding, holding.endpoint(name).home)


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
    from warren.broker.dlq import dlq_route, select
    from warren.commands import dlq_broker
    from warren.commands.dlq_render import letters_table

    cfg = load(config)
    name = endpoint
    lanes = _lanes(cfg, name)
    selection = _selection(types, since, until, None, limit, name if lanes else None)
    letters, depth = run(dlq_broker.read_letters(cfg, name, scan, config, lanes))
    chosen = select(letters, selection, newest_first=newest)
    if as_json:
        typer.echo(json.dumps([letter.summary() for letter in chosen], indent=2, ensure_ascii=False))
        return
    queue = dlq_route(cfg.broker.prefix, name, lanes)[0]
    order = "newest first" if newest else "oldest first"
    console.print(letters_table(chosen, f"{queue} · {order}", console.width))
    console.print(
        f"{len(chosen)} shown of {depth} dead letter(s){dlq_broker.scan_note(len(letters), depth)}", highlight=False
    )


@dlq_app.command("show")
def show_letter(
    endpoint: EndpointArg,
    event_id: Annotated[str, typer.Argument(help="The event id (the webhook-id).")],
    config: ConfigOption = None,
    as_json: JsonOpt = False,
    scan: ScanOpt = MAX_SCAN,
) -> None:
    """Print one dead letter whole: headers, envelope, attempt history."""
    from warren.broker.dlq import dlq_route
    from warren.commands import dlq_broker
    from warren.commands.dlq_render import letter_detail

    cfg = load(config)
    name = endpoint
    lanes = _lanes(cfg, name)
    letters, depth = run(dlq_broker.read_letters(cfg, name, scan, config, lanes))
    found = [x for x in letters if x.event_id == event_id and (not lanes or x.endpoint == name)]
    if not found:
        queue = dlq_route(cfg.broker.prefix, name, lanes)[0]
        fail(f"no dead letter {visible(event_id)} in {queue}{dlq_broker.scan_note(len(letters), depth)}")
    if as_json:
        document = [letter.whole() for letter in found]
        typer.echo(json.dumps(document[0] if len(document) == 1 else document, indent=2, ensure_ascii=False))
        return
    for index, letter in enumerate(found, 1):
        console.print(letter_detail(letter, index, len(found)))


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
    from warren.commands import dlq_broker

    cfg = load(config)
    name = endpoint
    lanes = _lanes(cfg, name)
    selection = _selection(types, since, until, ids, limit)
    try:
        seconds = parse_duration(timeout)
    except ValueError as exc:
        fail(f"--timeout: {exc}", EXIT_USAGE)
    if selection.narrows or newest or lanes or name == names.ROUTE_STAGE:  # a lane's DLQ is shared: never shovelled
        run(dlq_broker.replay_filtered(cfg, name, selection, newest, dry_run, scan, config, lanes))
    else:
        run(dlq_broker.replay_all(cfg, name, dry_run, seconds, config))


@dlq_app.command("purge")
def purge(
    endpoint: EndpointArg,
    config: ConfigOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete every dead letter of an endpoint for good (asks first)."""
    from warren.broker.dlq import dlq_route, purge_dlq
    from warren.commands import dlq_broker

    cfg = load(config)
    name = endpoint
    lanes = _lanes(cfg, name)
    if lanes:
        _purge_lane_letters(cfg, name, lanes, yes)
        return
    queue = dlq_route(cfg.broker.prefix, name)[0]
    if not yes:
        depth = run(dlq_broker.dlq_depth(cfg, name))
        if depth == 0:
            console.print(f"nothing to purge: {queue} is empty", highlight=False)
            return
        if not typer.confirm(f"Delete {depth} dead letter(s) from {queue} for good?", err=True):
            fail("purge cancelled: nothing deleted")
    purged = run(dlq_broker.with_broker(cfg, lambda c: purge_dlq(c, cfg.broker.prefix, name)))
    console.print(f"purged {purged} dead letter(s) from {queue}", highlight=False)


def _purge_lane_letters(cfg: WarrenConfig, name: str, lanes: int, yes: bool) -> None:
    """A lane endpoint's letters out of its lane's shared DLQ; every other endpoint's stay, in order."""
    from warren.broker.dlq import Selection, dlq_route, purge_selected
    from warren.commands import dlq_broker

    queue = dlq_route(cfg.broker.prefix, name, lanes)[0]
    if not yes and not typer.confirm(f"Delete the dead letters of {name} from {queue} for good?", err=True):
        fail("purge cancelled: nothing deleted")
    selection = Selection(endpoint=name)
    purged, depth = run(dlq_broker.with_broker(cfg, lambda c: purge_selected(c, queue, selection)))
    console.print(f"purged {purged} dead letter(s) of {name} from {queue}; {depth - purged} left", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``dlq`` group to the main CLI."""
    app.add_typer(dlq_app, name="dlq")
