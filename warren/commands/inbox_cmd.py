"""``warren receive`` (the verifying endpoint for inbound webhooks) and ``warren inbox`` (their consumer)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

import typer

from warren.common import EXIT_USAGE, ConfigOption, console, fail, load, run

if TYPE_CHECKING:  # the configuration (pydantic) and the receiving toolkit load when a command runs, not for --help
    from warren.topology.config import WarrenConfig

_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _require_sources(cfg: WarrenConfig) -> None:
    if not cfg.inbound:
        fail("the configuration has no [[inbound]] sources: nothing to receive", EXIT_USAGE)


def receive(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option("--host", help="Address to listen on (default: receiver.host).")] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", "-p", min=0, max=65535, help="Port to listen on (default: receiver.port)."),
    ] = None,
) -> None:
    """Serve the configured inbound sources: verify each webhook, queue it in RabbitMQ, answer 202."""
    from warren.receiving.running import serve_receiver

    cfg = load(config, inbound=True)
    _require_sources(cfg)
    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)

    def listening(bound_host: str, bound_port: int) -> None:
        console.print(f"warren receive listening on http://{bound_host}:{bound_port}", highlight=False)
        for source in cfg.inbound:
            console.print(f"  POST {source.route}  ({source.name}, verifier {source.verifier})", highlight=False)

    try:
        run(serve_receiver(cfg, host=host, port=port, on_listening=listening), service=True)
    except OSError as exc:
        fail(f"cannot listen on {host or cfg.receiver.host}:{cfg.receiver.port if port is None else port}: {exc}")


def inbox(
    config: ConfigOption = None,
    sources: Annotated[
        str | None, typer.Option("--sources", "-s", help="Comma-separated inbound sources to consume (default: all).")
    ] = None,
) -> None:
    """Consume the inbound queues: call each source's handler once per event, retry failures, DLQ the rest."""
    from warren.receiving.errors import HandlerError
    from warren.receiving.handlers import import_from_working_directory, load_handler
    from warren.receiving.running import run_inbox

    cfg = load(config)
    _require_sources(cfg)
    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    chosen = [s.strip() for s in sources.split(",") if s.strip()] if sources else None
    unknown = sorted(set(chosen or ()) - {s.name for s in cfg.inbound})
    if unknown:
        fail(f"no inbound source named {', '.join(unknown)} in the configuration", EXIT_USAGE)
    import_from_working_directory()  # handlers in the directory it runs from import as under `python -m`
    for source in cfg.inbound:
        if chosen is None or source.name in chosen:
            try:
                load_handler(source.handler)
            except HandlerError as exc:
                fail(f"inbound source {source.name!r}: {exc}", EXIT_USAGE)

    def started(_: object) -> None:
        console.print(f"warren inbox consuming {', '.join(chosen or [s.name for s in cfg.inbound])}", highlight=False)

    run(run_inbox(cfg, sources=chosen, on_started=started), service=True)


def register(app: typer.Typer) -> None:
    app.command("receive")(receive)
    app.command("inbox")(inbox)
