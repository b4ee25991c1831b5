"""Systems run side by side, run by run, in one sitting: what bench/tracing.py and bench/worker_cpu.py compare."""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bench.run import PY, ROOT, WORKLOADS, System, one_run, start_receiver

VARIANT = str(ROOT / "bench" / "worker_variant.py")


def variant(name: str, *args: str) -> System:
    """One Warren worker started by bench/worker_variant.py with ``args`` (``--source DIR``, ``--traced``)."""
    return System(1, "uvloop", launcher=(PY, VARIANT, *args), variant=name)


@contextlib.asynccontextmanager
async def sitting(title: str, runs: int, scale: float) -> AsyncIterator[Path]:
    """The receiver, a heading naming the machine and its load, and the load and the logs' folder at the end."""
    workdir = Path(tempfile.mkdtemp(prefix="warren-bench-"))
    receiver = await start_receiver(workdir)
    try:
        print(
            f"# {title} · {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}"
            f" · {runs} runs each, medians · --scale {scale:g} · {time.strftime('%Y-%m-%d %H:%M')}"
            f" · load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        yield workdir
        print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"worker logs: {workdir}")
    finally:
        receiver.send_signal(signal.SIGTERM)
        await receiver.wait()


async def interleaved(
    name: str, systems: list[System], runs: int, workdir: Path, scale: float
) -> dict[System, list[dict[str, float]]]:
    """``runs`` rounds of workload ``name``, each system once a round: drift in the machine's speed hits each alike."""
    results: dict[System, list[dict[str, float]]] = {s: [] for s in systems}
    for _ in range(runs):
        for system in systems:
            results[system].append(await one_run(WORKLOADS[name], system, workdir, 0, scale))
    return results
