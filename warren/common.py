"""What every command shares: the --config option, loading it with a clear error, and running coroutines."""

from __future__ import annotations

import shlex
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from warren.core.errors import WarrenError, describe

if TYPE_CHECKING:  # loaded when a command runs, not for its --help (pydantic and the catalog: about 0.15 s)
    from rich.progress import Progress

    from warren.topology.config import WarrenConfig

__all__ = [
    "ConfigOption",
    "command_line",
    "console",
    "err_console",
    "fail",
    "json_option",
    "load",
    "progress_bar",
    "run",
]

T = TypeVar("T")

console = Console()
err_console = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Configuration file (default: $WARREN_CONFIG, else ./warren.toml)."),
]

EXIT_USAGE = 2  # bad configuration or arguments
EXIT_FAILURE = 1  # the operation failed (broker down, drift found, ...)


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    # Escaped: messages quote names and binding keys such as [order.*], which rich would take for markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def command_line(*words: str, config: Path | None = None) -> str:
    """A ``warren`` command for a hint, as it can be pasted into a shell: ``words`` quoted, and the ``--config``
    this command was given (without one, the next command finds the file the same way: $WARREN_CONFIG, else
    ./warren.toml). Print it escaped (rich markup) and soft-wrapped (a line cut in two is not a command)."""
    return shlex.join(["warren", *words, *(("--config", str(config)) if config is not None else ())])


def progress_bar(label: str, *, transient: bool, disable: bool = False) -> Progress:
    """A bar on stderr counting what a command has done (``label``: publishing, replaying), with the time taken;
    ``transient`` clears it at the end."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=transient,
        disable=disable,
    )


def json_option(option: str, text: str) -> Any:
    """A JSON option's value (``--data``), read as the ingest API reads a body: orjson (1,024 levels at most),
    duplicate keys refused. A usage error otherwise, never a traceback."""
    import orjson

    from warren.core.strict_json import DUPLICATE_KEY, duplicate_key

    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        fail(f"{option} is not JSON: {exc}", EXIT_USAGE)
    duplicate = duplicate_key(text, parsed)
    if duplicate is not None:
        fail(f"{option}: " + DUPLICATE_KEY.format(duplicate), EXIT_USAGE)
    return parsed


def load(path: Path | None, *, signing: bool = False, api: bool = False, inbound: bool = False) -> WarrenConfig:
    """The configuration, or exit 2 with one message naming the file, the field and the problem.

    Each command asks for the secrets it uses, and loads without the others' ``env:NAME`` variables set (see
    ``load_config``): ``signing`` the worker (the endpoints' secrets), ``api`` warren api (its tokens),
    ``inbound`` warren receive (the inbound sources' secrets).
    """
    from warren.topology.config import ConfigError, load_config

    try:
        return load_config(path, signing_secrets=signing, api_tokens=api, inbound_secrets=inbound)
    except ConfigError as exc:
        fail(f"invalid configuration {exc}", EXIT_USAGE)


def run(coroutine: Coroutine[Any, Any, T], *, service: bool = False) -> T:
    """Run a command's coroutine; Warren's own errors become one line and exit 1, never a traceback.

    ``service`` marks the long-running commands (worker, api, receive, inbox): they run on uvloop when it is
    installed (``warren.loop``). The one-shot commands keep asyncio's loop (they wait on the broker, not on it),
    and Ctrl-C ends them within ``warren.loop.INTERRUPT_GRACE`` whatever a library does with the cancellation. A
    connection lost under a command is one line too.
    """
    from warren.loop import run_interruptible, run_on_best_loop

    try:
        return run_on_best_loop(coroutine) if service else run_interruptible(coroutine)
    except WarrenError as exc:
        fail(str(exc))
    except Exception as exc:
        from warren.broker.amqp.connection import link_lost  # here: `warren --help` need not import aio-pika

        if not link_lost(exc):
            raise
        fail(f"the connection to RabbitMQ was lost ({describe(exc)}); run the command again")
