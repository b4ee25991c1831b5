"""Warren installs beside the package index's ``broker``, ``consumers`` and ``topology``, and both sides import.

A wheel of this checkout (built as a user's pip builds it, with build isolation) goes into a fresh venv together
with those three distributions, pinned. pip resolves everything from the configured index and reuses its cache,
so a warm run takes about half a minute. The modules are then imported in the new venv, in isolated mode and
away from the checkout, so nothing can come from this tree instead of site-packages.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

pytestmark = [pytest.mark.install, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "warren")


@dataclass(frozen=True)
class Neighbour:
    """A distribution on the index whose module name is one Warren's subpackages once had at the top level."""

    name: str
    version: str
    requires_python: str  # its Requires-Python, so a Python it cannot install on skips it by name

    @property
    def unsupported(self) -> str | None:
        if platform.python_version() in SpecifierSet(self.requires_python):
            return None
        return f"{self.name} {self.version} needs Python {self.requires_python}, this is {platform.python_version()}"


NEIGHBOURS = (
    Neighbour("broker", "0.8.11", ">=3.10"),  # SatelliteQE's infrastructure middleman
    Neighbour("consumers", "0.6.1", ""),  # a parallel processing helper
    Neighbour("topology", "1.21.0", ">=3.7"),  # HPE's network topology framework
)

# Run in the fresh venv: where each module comes from, and which distribution owns each top-level name.
PROBE = """
import importlib, json, os, sys, sysconfig
from importlib.metadata import packages_distributions
names = json.loads(sys.argv[1])
modules = {name: importlib.import_module(name) for name in names}
from warren import Event, Publisher, connect
owners = packages_distributions()
print(json.dumps({
    "purelib": sysconfig.get_paths()["purelib"],
    "files": {name: module.__file__ for name, module in modules.items()},
    "links": [name for name, module in modules.items() if os.path.islink(os.path.dirname(module.__file__))],
    "owners": {name: owners.get(name.partition(".")[0]) for name in names},
    "distinct": [n for n in names if "warren." + n in modules and modules[n] is not modules["warren." + n]],
}))
"""


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path
    scripts: Path
    home: Path
    neighbours: tuple[Neighbour, ...]


def _check(
    command: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=cwd)
    assert result.returncode == 0, f"{command[:5]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _isolated_env(home: Path) -> dict[str, str]:
    """No PYTHONPATH or WARREN_* from the caller; a HOME of its own (the index's ``broker`` writes ~/.broker)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "WARREN_", "VIRTUAL_ENV"))}
    return {**env, "HOME": str(home), "COLUMNS": "200"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Warren's wheel and the supported neighbours, installed by one pip command into a fresh venv."""
    base = tmp_path_factory.mktemp("install")
    # Given a wheel of this checkout, built from a copy (pip builds in the source tree; the links are followed)
    source = base / "source"
    source.mkdir()
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    dist = base / "dist"
    _check([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-input", "-q", "-w", str(dist), str(source)])
    (wheel,) = dist.glob("warren_webhooks-*.whl")
    # And a fresh venv (no pip of its own: this pip installs into it, sharing its cache)
    venv = base / "venv"
    _check([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    neighbours = tuple(n for n in NEIGHBOURS if n.unsupported is None)
    pins = [f"{n.name}=={n.version}" for n in neighbours]
    _check([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-input", "-q", str(wheel), *pins])
    home = base / "home"
    home.mkdir()
    return Installed(wheel, python, venv / "bin", home, neighbours)


def test_the_wheel_holds_only_the_warren_package(installed: Installed) -> None:
    # When the wheel's RECORD and top_level.txt are read
    with zipfile.ZipFile(installed.wheel) as wheel:
        record_name = next(n for n in wheel.namelist() if n.endswith(".dist-info/RECORD"))
        paths = [line.split(",")[0] for line in wheel.read(record_name).decode().splitlines() if line]
        top_level = wheel.read(record_name.replace("RECORD", "top_level.txt")).decode().split()
    # Then every file is under warren/ or the wheel's own metadata: no other top-level module
    assert {p.split("/")[0] for p in paths if ".dist-info/" not in p} == {"warren"}
    assert top_level == ["warren"]
    # And every home is in it, as it lies in the checkout
    for path in ("warren/broker/publisher.py", "warren/consumers/worker.py", "warren/topology/config.py",
                 "warren/receiving/inbox.py", "warren/api/app.py", "warren/transport/http.py"):  # fmt: skip
        assert path in paths
    assert "warren/py.typed" in paths


@pytest.mark.parametrize("neighbour", NEIGHBOURS, ids=lambda n: n.name)
def test_the_index_distribution_imports_from_its_own_files(installed: Installed, neighbour: Neighbour) -> None:
    if neighbour.unsupported:
        pytest.skip(f"not installed: {neighbour.unsupported}")
    # When the neighbour and Warren's same-named subpackage are imported in the venv
    seen = _probe(installed, [neighbour.name, f"warren.{neighbour.name}"])
    # Then the neighbour's module is its own distribution's, in site-packages
    purelib = Path(seen["purelib"])
    assert Path(seen["files"][neighbour.name]) == purelib / neighbour.name / "__init__.py"
    assert seen["owners"][neighbour.name] == [neighbour.name]
    # And Warren's is a different module, inside warren/
    assert seen["distinct"] == [neighbour.name]
    assert Path(seen["files"][f"warren.{neighbour.name}"]) == purelib / "warren" / neighbour.name / "__init__.py"


def test_warren_and_its_subpackages_import_from_the_wheel(installed: Installed) -> None:
    # When Warren's packages are imported in the venv beside the neighbours
    names = ["warren", "warren.broker", "warren.consumers", "warren.topology", "warren.store", "warren.receiving"]
    names += ["warren.api", "warren.transport", "warren.serving", "warren.core"]
    seen = _probe(installed, [*names, *(n.name for n in installed.neighbours)])
    # Then each comes from warren/ in site-packages, as real folders, owned by warren-webhooks alone
    purelib = Path(seen["purelib"])
    for name in names:
        assert Path(seen["files"][name]) == purelib.joinpath(*name.split(".")) / "__init__.py"
        assert seen["owners"][name] == ["warren-webhooks"]
    assert seen["links"] == []
    assert seen["distinct"] == [n.name for n in installed.neighbours]


def test_the_warren_command_runs(installed: Installed) -> None:
    # When the installed console script is asked for help
    result = _check([str(installed.scripts / "warren"), "--help"], env=_isolated_env(installed.home))
    # Then it lists the commands
    for command in ("setup", "worker", "publish", "api", "receive", "inbox", "dlq"):
        assert f" {command} " in result.stdout


def _probe(installed: Installed, names: list[str]) -> dict[str, Any]:
    result = _check(
        [str(installed.python), "-I", "-c", PROBE, json.dumps(names)],
        env=_isolated_env(installed.home),
        cwd=installed.home,
    )
    seen: dict[str, Any] = json.loads(result.stdout)
    return seen
