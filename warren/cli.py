"""The ``warren`` command line. Each command lives in ``warren/commands/``; this module only assembles them."""

from __future__ import annotations

import importlib
import logging
from typing import Annotated, Any

import typer
import typer.core
import typer.main

# The modules of warren/commands/ and the commands each registers, in the order `warren --help` lists them. A
# command's module is imported only when that command runs (or help lists them all): each pulls in what its
# command needs (aio-pika, aiohttp, SQLAlchemy, rich tables), and every CLI call used to import all of them.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "api_cmd": ("api",),
    "setup_cmd": ("setup",),
    "publish_cmd": ("publish",),
    "worker_cmd": ("worker",),
    "inbox_cmd": ("receive", "inbox"),
    "status_cmd": ("status",),
    "topology_cmd": ("topology",),
    "dlq_cmd": ("dlq",),
    "endpoint_cmd": ("endpoint",),
    "store_cmd": ("store",),
    "key_cmd": ("key",),
    "attempts_cmd": ("attempts",),
}
_loaded: dict[str, dict[str, Any]] = {}  # module -> its commands, once per process


def module_commands(module: str) -> dict[str, Any]:
    """The click commands ``warren.commands.<module>`` registers (imported on first use)."""
    if module not in _loaded:
        part = typer.Typer()
        importlib.import_module(f"warren.commands.{module}").register(part)
        _loaded[module] = dict(typer.main.get_group(part).commands)
    return _loaded[module]


class _LazyGroup(typer.core.TyperGroup):
    """The root group: a command's module loads when the command is looked up.

    Its commands and contexts are Typer's own click objects (typed ``Any``: Typer 0.29 vendors click privately).
    """

    def list_commands(self, ctx: Any) -> list[str]:
        return [name for names in COMMAND_MODULES.values() for name in names]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        # An unknown name loads every module, so that the "did you mean" suggestion sees every command.
        homes = [module for module, names in COMMAND_MODULES.items() if cmd_name in names] or list(COMMAND_MODULES)
        for module in homes:
            for name, command in module_commands(module).items():
                self.commands.setdefault(name, command)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    name="warren",
    help="Warren: webhook delivery on RabbitMQ — signed, retried inside the broker, ordered per key.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
)


def _show_version(value: bool) -> None:
    if value:
        from warren import __version__

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


def main() -> None:
    # Without a handler of their own, Python prints the libraries' log records bare on stderr ("error when
    # creating transport ..." before Warren's one-line error). Commands report failures themselves; the
    # worker and the API configure logging, and these records then reach their handlers as usual.
    for library in ("aiormq", "aio_pika"):
        logging.getLogger(library).addHandler(logging.NullHandler())
    app()
