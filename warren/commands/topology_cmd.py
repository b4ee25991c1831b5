"""``warren topology show|export``: the plan as a tree, or as RabbitMQ definitions JSON. No broker needed, but
``show --live`` reads the live endpoints (created through the admin API) from RabbitMQ to plan them too."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from warren.common import ConfigOption, console, err_console, fail, load
from warren.core.errors import WarrenError

if TYPE_CHECKING:  # the configuration's models (pydantic) load with the configuration, not for --help
    from warren.topology.config import Endpoint, WarrenConfig

__all__ = ["register"]

PIPE_WIDTH = 200

topology_app = typer.Typer(
    name="topology",
    help="Show or export the RabbitMQ topology the configuration plans (reads the file only).",
    no_args_is_help=True,
)


def _with_live(settings: WarrenConfig) -> tuple[WarrenConfig, list[str]]:
    """The configuration with the live endpoints the endpoints stream holds, and their names; the file's alone
    (and a warning) when RabbitMQ cannot be read."""
    import asyncio  # here: `warren --help` need not import asyncio

    from warren.broker.live_set import read_live_endpoints, with_live_endpoints

    try:
        live = asyncio.run(read_live_endpoints(settings))
    except WarrenError as exc:
        err_console.print(f"[yellow]warning:[/] live endpoints not shown: {escape(str(exc))}", highlight=False)
        return settings, []
    file_names = {e.name for e in settings.endpoints}
    return with_live_endpoints(settings, live), sorted(n for n in live if n not in file_names)


def filter_lines(endpoints: Iterable[Endpoint]) -> list[str]:
    """The payload filters, after the tree: RabbitMQ holds none of them, workers apply them."""
    lines = [f"  {e.name} ({e.home}): {json.dumps(e.filter.source)}" for e in endpoints if e.filter is not None]
    if not lines:
        return []
    where = "applied by workers: a lane endpoint's when routed, a dedicated one's before the POST"
    return [f"Payload filters ({where}; docs/endpoints.md)", *lines]


@topology_app.command("show")
def show(
    config: ConfigOption = None,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Also plan the live endpoints (created through the admin API), read from RabbitMQ; marked live.",
        ),
    ] = False,
) -> None:
    """Print the plan as a tree: events exchange, endpoints and their queues, delay chain, dead letters."""
    from warren.topology.planner import plan_topology
    from warren.topology.render import plan_tree, render_text

    settings = load(config)
    live_names: list[str] = []
    if live:
        settings, live_names = _with_live(settings)
    plan = plan_topology(settings)
    broker = settings.broker
    title = f"Warren topology · vhost {broker.vhost!r} · prefix {broker.prefix!r} · {broker.queue_type} queues"
    if live:
        title += f" · {len(live_names)} live endpoint(s)"
    if console.is_terminal:
        console.print(plan_tree(plan, broker.prefix, title, live_names))
    else:
        # Piped or redirected: plain text, wide enough that names stay whole on one line (rich assumes 80).
        typer.echo(render_text(plan, broker.prefix, title, width=PIPE_WIDTH, live=live_names), nl=False)
    for line in filter_lines(settings.endpoints):
        typer.echo(line)


@topology_app.command("export")
def export(
    config: ConfigOption = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the JSON to this file instead of stdout.")
    ] = None,
    vhost: Annotated[
        str | None, typer.Option("--vhost", help="Vhost to put in the definitions (default: the broker URL's).")
    ] = None,
) -> None:
    """Write the plan as definitions JSON for `rabbitmqctl import_definitions` or the management UI."""
    from warren.topology.definitions import definitions
    from warren.topology.planner import plan_topology

    settings = load(config)
    document = definitions(plan_topology(settings), vhost or settings.broker.vhost)
    text = json.dumps(document, indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    counts = f"{len(document['exchanges'])} exchanges, {len(document['queues'])} queues"
    err_console.print(f"wrote {output} ({counts}, {len(document['bindings'])} bindings)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``topology`` group to the main CLI."""
    app.add_typer(topology_app, name="topology")
