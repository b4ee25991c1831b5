"""Systems run side by side, run by run, in one sitting, and their table: what bench/tracing.py and
bench/worker_cpu.py compare."""

from __future__ import annotations

import contextlib
import signal
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from bench.run import PY, ROOT, WORKLOADS, System, heading, load_average, one_run, start_receiver

VARIANT = str(ROOT / "bench" / "worker_variant.py")
Results = dict[System, list[dict[str, float]]]  # each system's runs of one workload, in the order they ran


def variant(name: str, *args: str) -> System:
    """One Warren worker started by bench/worker_variant.py with ``args`` (``--source DIR``, ``--traced``)."""
    return System(1, "uvloop", launcher=(PY, VARIANT, *args), variant=name)


@contextlib.asynccontextmanager
async def sitting(title: str, runs: int, scale: float) -> AsyncIterator[Path]:
    """The receiver, a heading naming the machine and its load, and the load and the logs' folder at the end."""
    workdir = Path(tempfile.mkdtemp(prefix="warren-bench-"))
    receiver = await start_receiver(workdir)
    try:
        print(heading(title, runs, scale))
        yield workdir
        print(f"\nload average at the end: {load_average()}")
        print(f"worker logs: {workdir}")
    finally:
        receiver.send_signal(signal.SIGTERM)
        await receiver.wait()


async def interleaved(name: str, systems: list[System], runs: int, workdir: Path, scale: float) -> Results:
    """``runs`` rounds of workload ``name``, each system once a round: drift in the machine's speed hits each alike."""
    results: Results = {s: [] for s in systems}
    for _ in range(runs):
        for system in systems:
            results[system].append(await one_run(WORKLOADS[name], system, workdir, 0, scale))
    return results


async def interleaved_table(
    title: str,
    columns: Sequence[str],
    cells: Callable[[System, list[dict[str, float]], Results], Sequence[str]],
    systems: list[System],
    workloads: list[str],
    runs: int,
    scale: float,
) -> None:
    """The sitting ``title``: a Markdown table with a row per workload and system, the systems interleaved run by
    run; after the workload and the system's name, ``columns`` (right-aligned), whose ``cells`` get the system's
    runs and every system's of that workload (to compare with)."""
    async with sitting(title, runs, scale) as workdir:
        print("\n| workload | system | " + " | ".join(columns) + " |")
        print("|---|---|" + "---:|" * len(columns))
        for name in workloads:
            results = await interleaved(name, systems, runs, workdir, scale)
            for system, rows in results.items():
                print(f"| {name} | {system.name} | " + " | ".join(cells(system, rows, results)) + " |", flush=True)
