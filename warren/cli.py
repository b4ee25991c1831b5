"""The ``warren`` command line. Each command lives in ``warren/commands/``; this module only assembles them."""

from __future__ import annotations

import logging

import typer

from warren.commands import (
    api_cmd,
    dlq_cmd,
    endpoint_cmd,
    inbox_cmd,
    publish_cmd,
    setup_cmd,
    status_cmd,
    topology_cmd,
    worker_cmd,
)

app = typer.Typer(
    name="warren",
    help="Warren: webhook delivery on RabbitMQ — signed, retried inside the broker, ordered per key.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
topology_cmd.register(app)
api_cmd.register(app)
setup_cmd.register(app)
publish_cmd.register(app)
worker_cmd.register(app)
inbox_cmd.register(app)
dlq_cmd.register(app)
status_cmd.register(app)
endpoint_cmd.register(app)


def main() -> None:
    # Without a handler of their own, Python prints the libraries' log records bare on stderr ("error when
    # creating transport ..." before Warren's one-line error). Commands report failures themselves; the
    # worker and the API configure logging, and these records then reach their handlers as usual.
    for library in ("aiormq", "aio_pika"):
        logging.getLogger(library).addHandler(logging.NullHandler())
    app()
