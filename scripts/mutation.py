"""Mutation testing of the pure policy modules with cosmic-ray (docs/mutation.md). Run it as scripts/mutation.

Each module is mutated in a copy of the checkout of its own (the checkout itself is never touched, so a run
cut short leaves no mutant behind), one mutant at a time, and each mutant is run against that module's own
broker-free tests only, under a time limit (a mutant that hangs is killed by it). Mutations inside type
annotations are not counted: with ``from __future__ import annotations`` they are strings that never run.
Prints killed/total per module and every survivor, with its line and diff.

Besides cosmic-ray's own operators, one of ours: ``warren/RemoveStatement`` replaces one statement of a
function's body with ``pass`` (a line removed: cosmic-ray has no such operator), given to cosmic-ray through its
table of operator providers.
"""

from __future__ import annotations

import argparse
import ast
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cosmic_ray.cli  # type: ignore[import-untyped]
import cosmic_ray.plugins  # type: ignore[import-untyped]
from cosmic_ray.operators.operator import Example, Operator  # type: ignore[import-untyped]
from cosmic_ray.work_db import WorkDB, use_db  # type: ignore[import-untyped]
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult  # type: ignore[import-untyped]
from parso.python.tree import Keyword

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = ROOT / ".venv" / "bin"

# module name -> (the module mutated, its own tests: pure, no RabbitMQ)
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "decision": ("warren/consumers/decision.py", ("tests/consumers/test_decision.py",)),
    "classify": ("warren/transport/classify.py", ("tests/transport/test_classify.py",)),
    "retry_after": ("warren/transport/retry_after.py", ("tests/transport/test_retry_after.py",)),
    "backoff": ("warren/topology/backoff.py", ("tests/topology/test_backoff.py",)),
    "delays": ("warren/topology/delays.py", ("tests/topology/test_delays.py",)),
    "names": ("warren/topology/names.py", ("tests/topology/test_names.py",)),
    "signing": ("warren/transport/signing.py", ("tests/transport/test_signing.py",)),
    "key_lanes": ("warren/consumers/key_lanes.py", ("tests/consumers/test_key_lanes.py",)),
    "filters": ("warren/core/filters.py", ("tests/core/test_filters.py",)),
}

# Only the plugins these tests use: the others (schemathesis, hypothesis) cost a second of start-up per mutant.
PYTEST = "-m pytest -x -q -p no:cacheprovider -p pytest_asyncio.plugin -p pytest_timeout"


class RemoveStatement(Operator):  # type: ignore[misc]
    """One simple statement of a function's body (an assignment, a call, a ``del``, a ``return``...) replaced by
    ``pass``. Docstrings and ``pass`` itself are left alone."""

    def mutation_positions(self, node: Any) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
        if node.type != "simple_stmt":
            return
        home = node.search_ancestor("funcdef", "classdef")
        if home is None or home.type != "funcdef":
            return  # module level, or a class body's fields
        body = [child for child in node.children if child.type != "newline"]
        if len(body) == 1 and (body[0].type in ("string", "strings") or getattr(body[0], "value", "") == "pass"):
            return
        yield (body[0].start_pos, body[-1].end_pos)

    def mutate(self, node: Any, index: int) -> Any:
        first = node.children[0]
        kept = [child for child in node.children if child.type == "newline"]
        node.children = [Keyword("pass", first.start_pos, prefix=first.get_first_leaf().prefix), *kept]
        for child in node.children:
            child.parent = node
        return node

    @classmethod
    def examples(cls) -> tuple[Any, ...]:
        return (
            Example("def f(x):\n    del x[0]\n", "def f(x):\n    pass\n"),
            Example('def f():\n    """doc"""\n    return 1\n', 'def f():\n    """doc"""\n    pass\n'),
        )


def cosmic_ray_with_our_operators(argv: list[str]) -> int:
    """cosmic-ray's command line, with ``warren/RemoveStatement`` among its operators."""
    cosmic_ray.plugins.OPERATOR_PROVIDERS["warren"] = {"RemoveStatement": RemoveStatement}
    return int(cosmic_ray.cli.main(argv) or 0)


@dataclass
class Score:
    module: str
    killed: int = 0
    timeouts: int = 0  # counted as killed: the mutant made the tests hang
    incompetent: int = 0  # the mutant could not be run at all (not counted)
    in_annotations: int = 0  # skipped: annotations never run
    survivors: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def total(self) -> int:
        return self.killed + len(self.survivors)

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.total if self.total else 100.0


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) of every annotation in ``source``, as (line 1-based, column 0-based) like cosmic-ray's."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            found += [arg.annotation for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if arg]
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        for ann in found:
            if ann is not None and ann.end_lineno is not None and ann.end_col_offset is not None:
                spans.append(((ann.lineno, ann.col_offset), (ann.end_lineno, ann.end_col_offset)))
    return spans


def skip_annotations(session: Path, module_file: Path) -> int:
    """Mark the session's mutations that fall inside an annotation as skipped; how many were."""

    spans = annotation_spans(module_file.read_text(encoding="utf-8"))
    skipped = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.work_items:
            for m in item.mutations:
                start, end = tuple(m.start_pos), tuple(m.end_pos)
                if any(s <= start and end <= e for s, e in spans):
                    skipped.append(item.job_id)
        if skipped:
            db.set_multiple_results(
                skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="inside an annotation")
            )
    return len(skipped)


def score_of(name: str, session: Path, module_file: Path, in_annotations: int) -> Score:

    score = Score(name, in_annotations=in_annotations)
    lines = module_file.read_text(encoding="utf-8").splitlines()
    with use_db(str(session), WorkDB.Mode.open) as db:
        items = sorted(db.completed_work_items, key=lambda ir: tuple(ir[0].mutations[0].start_pos))
        pending = len(db.pending_work_items)
    if pending:
        score.error = f"{pending} mutants were not run"
    for item, result in items:
        if result.worker_outcome is WorkerOutcome.SKIPPED:
            continue
        if result.test_outcome is TestOutcome.INCOMPETENT or result.worker_outcome is not WorkerOutcome.NORMAL:
            score.incompetent += 1
        elif result.test_outcome is TestOutcome.SURVIVED:
            m = item.mutations[0]
            line = m.start_pos[0]
            diff = "\n".join(
                f"      {d}" for d in (result.diff or "").splitlines() if d[:1] in "+-" and d[:3] not in ("+++", "---")
            )
            score.survivors.append(
                f"  {m.module_path}:{line}:{m.start_pos[1]}  {m.operator_name.removeprefix('core/')}"
                f" (in {m.definition_name or 'module'})\n      | {lines[line - 1].strip()}\n{diff}"
            )
        else:
            score.killed += 1
            score.timeouts += result.output == "timeout"
    return score


def run_module(name: str, workdir: Path, timeout: float, keep: Path | None) -> Score:
    module, tests = MODULES[name]
    copy = workdir / name
    for part in ("warren", "tests"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    command = f"{shlex.quote(str(VENV_BIN / 'python'))} {PYTEST} {' '.join(tests)}"
    config = copy / "cosmic-ray.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {module!r}\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {command!r}\n"
        "\n[cosmic-ray.distributor]\n"
        'name = "local"\n',
        encoding="utf-8",
    )
    session = (keep or copy) / f"{name}.sqlite"
    session.unlink(missing_ok=True)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTHONPATH"] = str(copy)  # the copy's warren, never the checkout's (the venv installs that one)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=copy, env=env, capture_output=True, text=True, check=False)

    baseline = run(*shlex.split(command))
    if baseline.returncode != 0:
        return Score(name, error=f"its tests fail without any mutant:\n{baseline.stdout[-3000:]}")
    cosmic_ray = (str(VENV_BIN / "python"), str(Path(__file__).resolve()), "--cosmic-ray")
    init = run(*cosmic_ray, "init", str(config), str(session))
    if init.returncode != 0:
        return Score(name, error=f"cosmic-ray init failed:\n{init.stderr[-3000:]}")
    in_annotations = skip_annotations(session, copy / module)
    done = run(*cosmic_ray, "exec", str(config), str(session))
    if done.returncode != 0:
        return Score(name, error=f"cosmic-ray exec failed:\n{done.stderr[-3000:]}")
    return score_of(name, session, copy / module, in_annotations)


def main() -> int:
    if sys.argv[1:2] == ["--cosmic-ray"]:
        return cosmic_ray_with_our_operators(sys.argv[2:])
    parser = argparse.ArgumentParser(prog="scripts/mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"modules to test (default: all): {', '.join(MODULES)}")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant's test run (default 60)")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="modules tested at once (default 1)")
    parser.add_argument("--keep", type=Path, help="keep the cosmic-ray sessions here (for cr-report, cr-html)")
    parser.add_argument("--fail-under", type=float, default=0.0, help="exit 1 if a module scores under this percentage")
    args = parser.parse_args()
    chosen = args.modules or list(MODULES)
    unknown = [m for m in chosen if m not in MODULES]
    if unknown:
        parser.error(f"unknown module {', '.join(unknown)} (known: {', '.join(MODULES)})")
    if args.keep:
        args.keep = args.keep.resolve()
        args.keep.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    scores = []
    with tempfile.TemporaryDirectory(prefix="warren-mutation-") as tmp, ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {n: pool.submit(run_module, n, Path(tmp), args.timeout, args.keep) for n in chosen}
        for n in chosen:
            score = futures[n].result()
            scores.append(score)
            print(f"== {n}: {MODULES[n][0]} against {' '.join(MODULES[n][1])}", flush=True)
            if score.error:
                print(f"  error: {score.error}", flush=True)
            for survivor in score.survivors:
                print(survivor, flush=True)
    print(f"\nmutation score per module ({time.monotonic() - started:.0f} s; timeout {args.timeout:g} s per mutant)")
    print(f"  {'module':<12} {'killed/total':>12} {'score':>7}  timeouts  incompetent  in annotations (skipped)")
    failed = False
    for s in scores:
        ratio = f"{s.killed}/{s.total}"
        counts = f"{s.timeouts:>8}  {s.incompetent:>11}  {s.in_annotations:>9}"
        print(f"  {s.module:<12} {ratio:>12} {s.percent:6.1f}%  {counts}" + (" ERROR" if s.error else ""))
        failed |= bool(s.error) or s.percent < args.fail_under
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
