"""``warren api``: the HTTP ingest API, until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from warren.common import EXIT_USAGE, ConfigOption, fail, load, run


def api(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option("--host", help="Address to listen on (default: api.host).")] = None,
    port: Annotated[
        int | None, typer.Option("--port", "-p", min=0, max=65535, help="Port to listen on (default: api.port).")
    ] = None,
) -> None:
    """Accept events over HTTP and publish them to RabbitMQ; 202 only once RabbitMQ confirmed them."""
    from warren.api.server import serve  # here: `warren api --help` need not import aiohttp, SQLAlchemy
    from warren.tracing.sdk import process_tracing

    cfg = load(config, api=True)
    if not cfg.api.tokens:
        fail("api.tokens is empty: configure at least one bearer token (literal or 'env:NAME')", EXIT_USAGE)
    if cfg.api.admin_tokens and cfg.store.url is None:
        fail("api.admin_tokens needs an endpoint store: set [store] url (docs/endpoints.md)", EXIT_USAGE)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        with process_tracing("warren-api"):
            run(serve(cfg, host=host, port=port), service=True)
    except OSError as exc:
        # Typically the port is taken or the address is not local: a one-line message, not a traceback.
        fail(f"cannot listen on {host or cfg.api.host}:{cfg.api.port if port is None else port}: {exc.strerror or exc}")


def register(app: typer.Typer) -> None:
    app.command("api")(api)
