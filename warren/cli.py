"""The ``warren`` command line. Each command lives in ``warren/commands/``; this module only assembles them."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer
import typer.core

from warren import __version__
from warren.commands import (
    api_cmd,
    attempts_cmd,
    dlq_cmd,
    endpoint_cmd,
    endpoint_edit_cmd,
    inbox_cmd,
    publish_cmd,
    setup_cmd,
    status_cmd,
    store_cmd,
    topology_cmd,
    worker_cmd,
)

app = typer.Typer(
    name="warren",
    help="Warren: webhook delivery on RabbitMQ — signed, retried inside the broker, ordered per key.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"warren {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", help="Print the version and exit.", callback=_show_version, is_eager=True),
    ] = False,
) -> None:
    """Warren: webhook delivery on RabbitMQ — signed, retried inside the broker, ordered per key."""


def _option_type(self: typer.core.TyperOption, ctx: Any) -> str | None:
    """A flag takes no value: Typer 0.29 renders one as ``--dry-run <bool>``, as if it needed one."""
    if self.is_flag or self.count or _typed_option is None:
        return None
    result: str | None = _typed_option(self, ctx)
    return result


# Only where Typer has that rendering hook (0.29); other versions are left as they are.
_typed_option = getattr(typer.core.TyperOption, "display_type_rich", None)
if _typed_option is not None:
    typer.core.TyperOption.display_type_rich = _option_type  # type: ignore[method-assign]
topology_cmd.register(app)
api_cmd.register(app)
setup_cmd.register(app)
publish_cmd.register(app)
worker_cmd.register(app)
inbox_cmd.register(app)
dlq_cmd.register(app)
status_cmd.register(app)
endpoint_cmd.register(app)
endpoint_edit_cmd.register(endpoint_cmd.endpoint_app)
store_cmd.register(app)
attempts_cmd.register(app)


def main() -> None:
    # Without a handler of their own, Python prints the libraries' log records bare on stderr ("error when
    # creating transport ..." before Warren's one-line error). Commands report failures themselves; the
    # worker and the API configure logging, and these records then reach their handlers as usual.
    for library in ("aiormq", "aio_pika"):
        logging.getLogger(library).addHandler(logging.NullHandler())
    app()
