"""``warren worker``: deliver until SIGTERM/SIGINT."""

from __future__ import annotations

from typing import Annotated

import typer

from warren.common import EXIT_USAGE, ConfigOption, fail, load, run
from warren.core.errors import WarrenError


def worker(
    config: ConfigOption = None,
    endpoints: Annotated[
        str | None, typer.Option("--endpoints", "-e", help="Comma-separated endpoint names to serve (default: all).")
    ] = None,
    log_format: Annotated[
        str | None, typer.Option("--log-format", help="text or json (default: worker.log_format).")
    ] = None,
) -> None:
    """Consume the endpoints' queues and deliver webhooks until SIGTERM or SIGINT.

    Besides the file's endpoints it serves the live ones (admin API, `warren endpoint create`), whose signing
    secrets are announced sealed with the store's keys: give it the same [store] keys (by default
    WARREN_STORE_KEY in its environment). Without a key that opens them it logs an error for each live
    endpoint, leaves its events queued, and serves the rest.
    """
    # Here, not above: `warren worker --help` need not import aio-pika, aiohttp and OpenTelemetry.
    from warren.consumers.attempt_log import configure_logging
    from warren.consumers.worker import Worker
    from warren.core.collector import raise_young_threshold
    from warren.tracing.sdk import process_tracing

    cfg = load(config, signing=True)
    if log_format not in (None, "text", "json"):
        fail("--log-format is text or json", EXIT_USAGE)
    configure_logging(log_format or cfg.worker.log_format)
    names = [n.strip() for n in endpoints.split(",") if n.strip()] if endpoints else None
    if not cfg.endpoints and names:
        fail("the configuration has no [[endpoints]] to choose from with --endpoints", EXIT_USAGE)
    try:
        instance = Worker(cfg, names)
    except WarrenError as exc:
        fail(str(exc), EXIT_USAGE)
    raise_young_threshold()  # hundreds of deliveries in flight: warren/core/collector.py says why
    with process_tracing("warren-worker"):
        run(instance.run(), service=True)


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)
