"""The CLI's conventions: --version, -h beside --help everywhere, flags shown as flags, a typed package."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import warren
from tests.support.cli import warren_sync

ROOT = Path(__file__).resolve().parents[2]

COMMANDS = [(), ("setup",), ("dlq", "replay"), ("status",)]


def test_version_prints_the_package_version() -> None:
    for flag in ("--version", "-V"):
        result = warren_sync(flag)
        assert result.returncode == 0 and result.stdout.strip() == f"warren {warren.__version__}", result.stderr
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", warren.__version__)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "warren")
def test_dash_h_is_help_and_flags_take_no_value(command: tuple[str, ...]) -> None:
    # When -h is asked of the command
    short, long = warren_sync(*command, "-h"), warren_sync(*command, "--help")
    # Then it is the same help as --help, and no flag is shown as if it took a <bool> value
    assert short.returncode == 0 and short.stdout == long.stdout, short.stderr
    assert "Usage: " in short.stdout
    assert "<bool>" not in short.stdout, short.stdout


def test_the_package_is_typed() -> None:
    assert (ROOT / "warren" / "py.typed").is_file()
    assert 'warren = ["py.typed"]' in (ROOT / "pyproject.toml").read_text()


def test_the_lazy_command_table_names_every_command_each_module_registers() -> None:
    # Given each command module registered on a Typer of its own (what `warren --help` would list)
    import typer
    import typer.main

    from warren.cli import COMMAND_MODULES

    for module, names in COMMAND_MODULES.items():
        part = typer.Typer()
        importlib.import_module(f"warren.commands.{module}").register(part)
        # Then the table warren.cli loads them by names exactly those commands, in their help order
        assert tuple(typer.main.get_group(part).commands) == names, module
    modules = {path.stem for path in (ROOT / "warren" / "commands").glob("*_cmd.py")}
    assert modules - set(COMMAND_MODULES) == {"endpoint_edit_cmd"}  # registered by endpoint_cmd under `endpoint`


def test_a_command_imports_only_what_it_needs() -> None:
    # When `warren topology show -h` runs, Then neither the HTTP server, the store nor the other commands load
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['warren', 'topology', 'show', '-h']\n"
        "try:\n    runpy.run_module('warren', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = ('aiohttp.web', 'sqlalchemy', 'warren.commands.')\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(heavy))), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert result.returncode == 0 and "Usage: " in result.stdout, result.stderr
    assert result.stderr.split() == ["warren.commands.topology_cmd"], result.stderr
