"""The ``warren`` command line. Each command lives in ``warren/commands/``; this module only assembles them."""

from __future__ import annotations

import typer

from warren.commands import topology_cmd

app = typer.Typer(
    name="warren",
    help="Warren: webhook delivery on RabbitMQ — signed, retried inside the broker, ordered per key.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
topology_cmd.register(app)


def main() -> None:
    app()
