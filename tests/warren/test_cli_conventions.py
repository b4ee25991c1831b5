"""The CLI's conventions: --version, -h beside --help everywhere, flags shown as flags, a typed package."""

from __future__ import annotations

import re
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
