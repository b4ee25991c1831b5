"""The CLI starts cheaply: help, and a command's start before it needs them, import none of the heavy libraries.

Every ``warren`` call used to pay for aio-pika, aiohttp, SQLAlchemy, OpenTelemetry and the configuration's pydantic
models before parsing its arguments (``warren --help`` took about a second of CPU). Measured by what a child
process has imported, not by a clock: a loaded machine makes a time limit flaky, and a module list is the cause
a time limit would only hint at.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import clean_env
from warren.cli import COMMAND_MODULES

ROOT = Path(__file__).resolve().parents[2]

# What a command loads when it runs, never for its help: the AMQP client, the HTTP client and server, the store,
# tracing, and the configuration (its pydantic-settings models, the catalog's jsonschema). typer 0.29 itself
# imports pydantic to coerce option values, so pydantic alone is not in the list.
HEAVY = ("aiohttp", "aio_pika", "aiormq", "sqlalchemy", "alembic", "asyncpg", "opentelemetry", "pydantic_settings",
         "jsonschema", "cryptography", "uvloop", "warren.topology.config")  # fmt: skip

# Run in a child: the command lines of argv[1] (a JSON list of lists), each through warren.cli.main as `warren`
# runs it, then for each the heavy modules loaded so far, its exit code and whether it printed a usage.
PROBE = """
import contextlib, io, json, sys
from warren.cli import main
heavy = tuple(sys.argv[2:])
report = []
for words in json.loads(sys.argv[1]):
    sys.argv = ["warren", *words]
    out = io.StringIO()
    code = None
    with contextlib.redirect_stdout(out):
        try:
            main()
        except SystemExit as exc:
            code = exc.code
    loaded = sorted(m for m in sys.modules if m in heavy or m.split(".")[0] in heavy)
    report.append({"words": words, "code": code, "usage": "Usage: " in out.getvalue(), "heavy": loaded})
print(json.dumps(report))
"""


def _probe(*lines: list[str]) -> list[dict[str, object]]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(lines), *HEAVY],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=clean_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report: list[dict[str, object]] = json.loads(result.stdout)
    return report


def _subcommands(group: str) -> list[str]:
    """The commands of a group (``dlq``: list, show, ...), read from its click group in this process."""
    from warren.cli import module_commands

    home = next(module for module, names in COMMAND_MODULES.items() if group in names)
    command = module_commands(home)[group]
    return sorted(getattr(command, "commands", {}))


def test_importing_the_cli_imports_no_heavy_library() -> None:
    # When the entry point's module is imported, Then none of the heavy libraries is
    probe = f"import sys, warren.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, cwd=ROOT, env=clean_env()
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


def test_warren_help_lists_every_command_without_loading_a_heavy_library() -> None:
    # When `warren --help` runs
    (report,) = _probe(["--help"])
    # Then it prints its usage and exits 0, with none of the heavy libraries imported
    assert report["code"] == 0 and report["usage"], report
    assert report["heavy"] == [], report


@pytest.mark.parametrize("command", [name for names in COMMAND_MODULES.values() for name in names])
def test_a_commands_help_loads_no_heavy_library(command: str) -> None:
    # Given a command, and each of its subcommands when it is a group (dlq list, endpoint create, ...)
    lines = [[command, "--help"], *([command, sub, "--help"] for sub in _subcommands(command))]
    # When each one's --help runs, one after the other in one process
    report = _probe(*lines)
    # Then each printed its usage and exited 0, and none had imported a heavy library
    assert [r["words"] for r in report] == lines
    for entry in report:
        assert entry["code"] == 0 and entry["usage"], entry
        assert entry["heavy"] == [], entry
