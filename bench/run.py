"""Warren's benchmark: workloads against real processes, beside the machine's ceilings, in one run.

    .venv/bin/python bench/run.py [--runs 3] [--workers 1,2]
                                  [--workloads happy,flaky,slow,happy-ordered,latency,latency-ordered]
                                  [--loops uvloop|asyncio|asyncio,uvloop] [--skip-ceilings]
                                  [--attempt-log off|on|both]

Starts a receiver process, then for each workload and each system under test (Warren with N worker processes,
and the bare-loop baseline, on each event loop asked for) declares a fresh topology, starts the consumers, runs the
publisher in its own process, and waits until every event has been answered 2xx once. Prints medians of the runs,
the ratio to the bare loop on the same event loop (deliveries/s and per CPU-second), and with two loops the ratio
of uvloop to asyncio. The latency workloads publish at a fixed rate, half of the capacity measured for their
throughput workload in the same run, so that their percentiles are publish-to-delivery without a backlog.
``--attempt-log both`` runs each Warren system with the attempt log off and on, side by side (a consumer in this
process drains ``{prefix}.attempts``, as the writer of ``warren api`` would), and prints the ratio per run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import signal
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import cpu
from bench.stale_prefixes import sweep
from bench.topology_teardown import declared
from tests.support.processes import write_config
from warren.broker.amqp.connection import connect_once
from warren.store.attempt_records import decode_batch
from warren.topology import names
from warren.topology.config import WarrenConfig

PY = sys.executable
AMQP = os.environ.get("WARREN_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
MGMT = os.environ.get("WARREN_BENCH_MANAGEMENT_URL", "http://guest:guest@127.0.0.1:15672")


def free_port() -> int:
    """A port nobody listens on now: several people may run this benchmark on one machine at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


PORT = int(os.environ.get("WARREN_BENCH_PORT") or free_port())
PROFILE = os.environ.get("WARREN_BENCH_PROFILE")  # a directory: profile every worker with py-spy
LOOP_LAG = os.environ.get("WARREN_BENCH_LOOP_LAG")  # a directory: every worker's loop lag (bench/worker_variant.py)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@dataclass(frozen=True)
class Workload:
    name: str
    count: int
    receiver: dict[str, Any]  # the receiver's behaviour (bench/receiver.py, POST /reset)
    ordered: bool = False
    bare: bool = True  # the bare loop has no retries: it is compared only where nothing fails
    # A fixed-rate workload publishes at half of the capacity that this workload measured (deliveries/s),
    # for LATENCY_SECONDS, so that its latencies are the pipeline's own and not a backlog's.
    half_of: str | None = None
    partitions: int = 32  # ordered only; partition_prefetch is 512 / partitions, so 512 in flight at most
    # More than one: endpoints bench-0 ... bench-<n-1>, each subscribed to its own event type (bench.t<k>), the
    # publisher spreading the events evenly over the types; 512 in flight at most in total, as with one.
    endpoints: int = 1
    home: str = "dedicated"  # or "lane": the endpoints share LANES lanes (bench/lanes.py)
    # Endpoints beside those (bench/lanes.py's misbehaving ones): (name, event patterns); the receiver leaves
    # their requests out of its counts.
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


LANES = 16  # [lanes] count, for workloads whose endpoints live on lanes
ROUTE_PREFETCH = 512  # [lanes] route_prefetch for them: 512 in flight, as the dedicated endpoints have


LATENCY_SECONDS = 10
WORKLOADS = {
    "happy": Workload("happy", 20_000, {"delay_ms": 0, "fail_first": 0}),
    "flaky": Workload("flaky", 10_000, {"delay_ms": 0, "fail_first": 0.2}, bare=False),
    "slow": Workload("slow", 5_000, {"delay_ms": 50, "fail_first": 0}),
    "happy-ordered": Workload("happy-ordered", 20_000, {"delay_ms": 0, "fail_first": 0}, ordered=True, bare=False),
    "latency": Workload("latency", 0, {"delay_ms": 0, "fail_first": 0}, half_of="happy"),
    "latency-ordered": Workload(
        "latency-ordered", 0, {"delay_ms": 0, "fail_first": 0}, ordered=True, bare=False, half_of="happy-ordered"
    ),
}


@dataclass(frozen=True)
class System:
    """A system under test: ``workers`` Warren worker processes (0: the bare loop) on one event loop."""

    workers: int
    loop: str  # "uvloop" or "asyncio" (Warren with uvloop made unimportable: bench/without_uvloop.py)
    attempt_log: bool = False  # workers publish attempt records (worker.attempt_log), drained by this process
    # Another way to start the worker (bench/worker_variant.py: another checkout's code, tracing on), and its name.
    launcher: tuple[str, ...] = ()
    variant: str = ""

    @property
    def name(self) -> str:
        if not self.workers:
            return f"bare · {self.loop}"
        name = f"{self.workers}x warren · {self.loop}" + (" · attempt log" if self.attempt_log else "")
        return name + (f" · {self.variant}" if self.variant else "")


def bench_endpoint(name: str, events: list[str], concurrency: int, home: str) -> dict[str, Any]:
    return {
        "name": name,
        "url": f"http://127.0.0.1:{PORT}/hook/{name}",
        "secret": SECRET,
        "events": events,
        "concurrency": concurrency,
        "timeout": "10s",
        "home": home,
    }


def endpoints_of(workload: Workload) -> list[dict[str, Any]]:
    if workload.endpoints == 1:
        endpoints = [bench_endpoint("bench", ["#"], 512, workload.home)]
    else:
        each = max(1, 512 // workload.endpoints)
        endpoints = [
            bench_endpoint(f"bench-{k}", [f"bench.t{k}"], each, workload.home) for k in range(workload.endpoints)
        ]
    endpoints += [bench_endpoint(name, list(events), 16, workload.home) for name, events in workload.extra]
    return endpoints


def config_for(
    prefix: str, workload: Workload, metrics_port: int | None = None, attempt_log: bool = False
) -> WarrenConfig:
    endpoints = endpoints_of(workload)
    if workload.ordered:
        endpoints[0].update(
            ordering="key", partitions=workload.partitions, partition_prefetch=max(1, 512 // workload.partitions)
        )
    return WarrenConfig(
        broker={"url": AMQP, "management_url": MGMT, "prefix": prefix},
        # Lanes park through the delay chain for up to 30 s (longer until an open circuit's probe). The chain once
        # reached only the longest retry delay (a 500 ms cap brought every park back after 0.5 s); with lanes on it
        # now reaches a minute whatever the cap. The 32 s cap stays, so that figures compare with earlier sittings.
        retry={"base": "50ms", "cap": "32s" if workload.home == "lane" else "500ms", "max_attempts": 10},
        delivery={"allow_private_networks": True},
        # Every feature on: the attempt lines (JSON, to a file) and the Prometheus metrics (served, not scraped);
        # the attempt records on {prefix}.attempts when the system says so.
        worker={
            "log_format": "json",
            "metrics_port": metrics_port,
            "metrics_host": "127.0.0.1",
            "attempt_log": attempt_log,
        },
        endpoints=endpoints,
        # The routing stage's window as the dedicated endpoints' (16 x 32): it is the inline deliveries' too.
        lanes={"count": LANES, "route_prefetch": ROUTE_PREFETCH} if workload.home == "lane" else {"count": 0},
    )


async def http(method: str, path: str, body: Any = None) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, f"http://127.0.0.1:{PORT}{path}", json=body) as response,
    ):
        return await response.json()


async def start(cmd: list[str], log: Path, ready: bytes) -> asyncio.subprocess.Process:
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(*cmd, stdout=out, stderr=out)
    deadline = time.monotonic() + 30
    while ready not in log.read_bytes():
        if process.returncode is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{cmd[2:4]} did not start:\n{log.read_text()[-2000:]}")
        await asyncio.sleep(0.05)
    return process


def cpu_seconds(processes: list[asyncio.subprocess.Process]) -> float:
    """User plus system CPU time the processes have used so far."""
    seconds = [cpu.process_seconds(process.pid) for process in processes]
    if None in seconds:
        raise RuntimeError("a consumer process is gone: its CPU time cannot be read")
    return sum(s for s in seconds if s is not None)


def cpu_cell(rows: list[dict[str, float]]) -> str:
    """CPU seconds per 1,000 deliveries, medians: the consumer's / the broker's / the whole machine's."""
    broker = median(rows, "broker_s_per_1k") if all(r["broker_s_per_1k"] >= 0 for r in rows) else None
    return (
        f"{median(rows, 'worker_s_per_1k'):.3f} / {'-' if broker is None else f'{broker:.3f}'} / "
        f"{median(rows, 'machine_s_per_1k'):.3f}"
    )


def lost_cell(rows: list[dict[str, float]]) -> str:
    """Most lost in a run (confirmed, never delivered); publishes RabbitMQ never confirmed are shown apart."""
    cell = f"{max(r['lost'] for r in rows):.0f}"
    unconfirmed = max(r.get("unconfirmed", 0) for r in rows)
    return cell + (f" ({unconfirmed:.0f} not confirmed to the publisher)" if unconfirmed else "")


def worker_command(loop: str, path: Path, launcher: tuple[str, ...] = ()) -> list[str]:
    if LOOP_LAG and not launcher and loop == "uvloop":  # the event loop's lag, a file per worker
        launcher = (PY, str(ROOT / "bench" / "worker_variant.py"), "--loop-lag", f"{LOOP_LAG}/{path.stem}.lag")
    if launcher:
        return [*launcher, "worker", "--config", str(path)]
    if loop == "uvloop":
        return [PY, "-m", "warren", "worker", "--config", str(path)]
    return [PY, str(ROOT / "bench" / "without_uvloop.py"), "warren", "worker", "--config", str(path)]


async def profile(process: asyncio.subprocess.Process, out: Path) -> None:
    """Sample a consumer with py-spy for a while (WARREN_BENCH_PROFILE): collapsed stacks, one file each."""
    await asyncio.create_subprocess_exec(
        str(Path(PY).parent / "py-spy"),
        "record",
        "--format",
        "raw",
        "-o",
        str(out),
        "--rate",
        "250",
        "--duration",
        "8",
        "--nonblocking",
        "--pid",
        str(process.pid),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


class AttemptDrain:
    """Consumes ``{prefix}.attempts`` as the attempt-log writer would (decoding each batch), counting records."""

    def __init__(self, prefix: str) -> None:
        self.queue = names.attempts_queue(prefix)
        self.records = 0
        self.last = time.monotonic()
        self._connection: Any = None

    async def start(self) -> AttemptDrain:
        self._connection = await connect_once([AMQP], name="bench-attempt-drain")
        channel = await self._connection.channel()
        await channel.set_qos(prefetch_count=64)
        queue = await channel.declare_queue(self.queue, passive=True)
        await queue.consume(self._take)
        return self

    async def _take(self, message: Any) -> None:
        self.records += len(decode_batch(message.body))
        self.last = time.monotonic()
        await message.ack()

    async def settle(self, quiet: float = 1.0, limit: float = 15.0) -> None:
        """Wait until nothing came for ``quiet`` seconds (the workers' last batches are in)."""
        deadline = time.monotonic() + limit
        while time.monotonic() - self.last < quiet and time.monotonic() < deadline:
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()


async def one_run(
    workload: Workload, system: System, workdir: Path, rate: float = 0, scale: float = 1, publisher: str = "warren"
) -> dict[str, float]:
    """One system through one workload (``scale`` times its events); ``rate`` > 0: that rate, LATENCY_SECONDS.
    ``publisher``: ``bench/publisher.py --kind`` (``bare``: plain aio-pika, bench/user_mode.py's bare loop)."""
    config = config_for(f"bench{uuid.uuid4().hex[:6]}", workload)
    async with declared(config):  # if this process dies mid-run, the next sitting's sweep deletes its queues
        return await _one_run(config, workload, system, workdir, rate, scale, publisher)


async def _one_run(
    config: WarrenConfig, workload: Workload, system: System, workdir: Path, rate: float, scale: float, publisher: str
) -> dict[str, float]:
    prefix = config.broker.prefix
    drain = await AttemptDrain(prefix).start() if system.attempt_log else None
    count = round(rate * LATENCY_SECONDS) if rate else round(workload.count * scale)
    await http("POST", "/reset", workload.receiver)
    processes: list[asyncio.subprocess.Process] = []
    stopping = False
    try:
        if not system.workers:
            processes.append(
                await start(
                    [
                        PY,
                        str(ROOT / "bench" / "bare_loop.py"),
                        "--url",
                        AMQP,
                        "--queue",
                        names.work_queue(prefix, "bench"),
                        "--target",
                        f"http://127.0.0.1:{PORT}/hook/bench",
                        "--prefetch",
                        "512",
                        "--loop",
                        system.loop,
                    ],
                    workdir / f"{prefix}-bare.log",
                    f"bare loop consuming on {system.loop}".encode(),
                )
            )
        else:
            for i in range(system.workers):
                log = workdir / f"{prefix}-w{i}.log"
                worker_config = config_for(prefix, workload, free_port(), system.attempt_log)
                path = write_config(workdir, worker_config, f"{prefix}-w{i}.toml")
                process = await start(worker_command(system.loop, path, system.launcher), log, b"worker consuming")
                processes.append(process)
                if f"event loop {system.loop}".encode() not in log.read_bytes():  # measure what the row says
                    raise RuntimeError(f"the worker is not on {system.loop}:\n{log.read_text()[-2000:]}")
        if PROFILE:
            for i, process in enumerate(processes):
                slug = system.name.replace(" · ", "-").replace(" ", "")
                await profile(process, Path(PROFILE) / f"{workload.name}-{slug}-{prefix}-{i}.txt")
        cpu_at_start = cpu_seconds(processes)  # after startup: imports and connecting are not per event
        broker = cpu.broker_pid(AMQP)  # looked up per run: another process may have restarted the node
        broker_at_start, machine_at_start = cpu.process_seconds(broker), cpu.machine_busy_seconds()
        publisher = await asyncio.create_subprocess_exec(
            PY,
            str(ROOT / "bench" / "publisher.py"),
            "--kind",
            publisher,
            "--url",
            AMQP,
            "--prefix",
            prefix,
            "--count",
            str(count),
            *(["--rate", str(rate)] if rate else []),
            *(["--types", str(workload.endpoints)] if workload.endpoints > 1 else []),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await publisher.communicate()
        published = orjson.loads(out.splitlines()[-1])
        # Warren answers for what RabbitMQ confirmed to the publisher: a publish refused or cut off (a broker
        # restarted by something else on the machine) is counted apart, as not confirmed.
        confirmed = int(published["published"])
        deadline = time.monotonic() + 180
        stats = await http("GET", "/stats")
        while stats["distinct_ok"] < confirmed and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            stats = await http("GET", "/stats")
        used = cpu_seconds(processes) - cpu_at_start
        broker_now = cpu.process_seconds(broker)
        broker_used = None if broker_now is None or broker_at_start is None else broker_now - broker_at_start
        machine_used = cpu.machine_busy_seconds() - machine_at_start
        thousands = max(1e-9, stats["distinct_ok"] / 1000)
        records = 0
        if drain is not None:
            for process in processes:  # their last records are flushed on shutdown
                process.send_signal(signal.SIGTERM)
            stopping = True
            await drain.settle()
            records = drain.records
        return {
            "per_cpu_s": stats["distinct_ok"] / max(1e-9, used),
            "worker_s_per_1k": used / thousands,
            "broker_s_per_1k": -1.0 if broker_used is None else broker_used / thousands,  # -1: not on this machine
            "machine_s_per_1k": machine_used / thousands,
            "publish_per_s": published["rate"],
            "deliveries_per_s": stats["distinct_ok"] / max(1e-9, stats["last_ok"] - published["started"]),
            # The user's rate (bench/user_mode.py): from the first publish, the connection already open.
            "user_per_s": stats["distinct_ok"] / max(1e-9, stats["last_ok"] - published["first_publish"]),
            "publish_user_per_s": published["publish_rate"],
            "publisher_s_per_1k": published["cpu_s"] / max(1e-9, confirmed / 1000),
            "p50_ms": (stats["p50"] or 0) * 1000,
            "p99_ms": (stats["p99"] or 0) * 1000,
            "lost": max(0, confirmed - stats["distinct_ok"]),
            "unconfirmed": count - confirmed,
            "rate": rate,
            "requests": stats["requests"],
            "records": records,
        }
    finally:
        if drain is not None:
            await drain.close()
        for process in processes:
            if process.returncode is None and not stopping:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            await asyncio.wait_for(process.wait(), 30)


async def sweep_stale() -> None:
    """Before a sitting: delete what benchmark runs that stopped mid-way left on the node (bench/stale_prefixes.py)."""
    for gone in await sweep(MGMT):
        print(f"deleted the queues and exchanges of {gone}: a benchmark run stopped mid-way left them", file=sys.stderr)


@contextlib.asynccontextmanager
async def receiving(workdir: Path) -> AsyncIterator[None]:
    """The receiver process on PORT, once it answers (``start_receiver``); stopped after."""
    receiver = await start_receiver(workdir)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # the last run's first deliveries dumped too (WARREN_BENCH_LATENCY_DUMP)
            await http("POST", "/reset", {})
        receiver.send_signal(signal.SIGTERM)
        await receiver.wait()


async def print_ceilings(workdir: Path, runs: int) -> None:
    """The machine's ceilings, ``runs`` times: medians, and each run."""
    rows = [await ceilings(workdir) for _ in range(runs)]
    print("\n## Ceilings (same machine, same run)")
    for key in ("publish_confirmed_per_s", "consume_ack_per_s", "aiohttp_post_per_s"):
        print(f"- {key}: {median(rows, key):,.0f}/s  (runs: {', '.join(f'{r[key]:,.0f}' for r in rows)})")


async def ceilings(workdir: Path) -> dict[str, float]:
    process = await asyncio.create_subprocess_exec(
        PY,
        str(ROOT / "bench" / "ceilings.py"),
        "--url",
        AMQP,
        "--queue",
        f"bench-ceiling-{uuid.uuid4().hex[:6]}",
        "--target",
        f"http://127.0.0.1:{PORT}/hook/ceiling",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    await http("POST", "/reset", {})
    result: dict[str, float] = orjson.loads(out.splitlines()[-1])
    return result


def median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def pair_ratios(rows: list[dict[str, float]], reference: list[dict[str, float]], key: str) -> list[float]:
    # Pair by pair: run i of each system ran back to back, so their ratio cancels the drift.
    return [a[key] / b[key] for a, b in zip(rows, reference, strict=True)]


def per_run_ratio(rows: list[dict[str, float]], reference: list[dict[str, float]], key: str) -> str:
    pairs = pair_ratios(rows, reference, key)
    return f"{statistics.median(pairs):.2f} ({', '.join(f'{p:.2f}' for p in pairs)})"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def heading(title: str, runs: int, scale: float) -> str:
    """A sitting's first line: what ran, on which machine, how often, and how loaded the machine was."""
    return (
        f"# {title} · {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}"
        f" · {runs} runs each, medians · --scale {scale:g} · {time.strftime('%Y-%m-%d %H:%M')}"
        f" · load average {load_average()}"
    )


def counts(text: str) -> list[int]:
    """A comma-separated list of counts, as the command lines take them (``1,2``, ``32,4``)."""
    return [int(n) for n in text.split(",")]


@dataclass(frozen=True)
class Verdict:
    """One of issue 13's targets, beside what this run measured."""

    what: str
    measured: float
    target: str  # "≥ 0.95", "< 50 ms"
    met: bool

    @classmethod
    def ratio_at_least(cls, what: str, pairs: list[float], floor: float) -> Verdict:
        """The median of per-run ratios (``pair_ratios``) against a floor."""
        measured = statistics.median(pairs)
        return cls(what, measured, f"≥ {floor}", measured >= floor)

    def row(self) -> str:
        unit = " ms" if self.target.endswith("ms") else ""
        return f"| {self.what} | {self.measured:,.2f}{unit} | {self.target} | {'met' if self.met else 'NOT met'} |"


VS_BARE_TARGET = 0.95  # one worker, every feature on, against the uvloop bare loop (happy and slow)
P99_TARGET_MS = {"latency": 50.0, "latency-ordered": 100.0}  # publish-to-delivery at half load


def attempt_log_rows(name: str, results: dict[System, list[dict[str, float]]]) -> list[str]:
    """For each Warren system run with the attempt log on, the ratio to the same system with it off (per run)."""
    lines = []
    for system, rows in results.items():
        if not system.attempt_log:
            continue
        off = results.get(System(system.workers, system.loop, False))
        if not off:
            continue
        lines.append(
            f"| {name} | {system.workers}x warren · {system.loop} | {median(off, 'deliveries_per_s'):,.0f} | "
            f"{median(rows, 'deliveries_per_s'):,.0f} | {per_run_ratio(rows, off, 'deliveries_per_s')} | "
            f"{per_run_ratio(rows, off, 'per_cpu_s')} | {min(r['records'] for r in rows):,.0f} |"
        )
    return lines


async def start_receiver(workdir: Path) -> asyncio.subprocess.Process:
    """bench/receiver.py on PORT, once it answers (a loaded machine takes seconds to start Python)."""
    await sweep_stale()
    receiver = await start(
        [PY, str(ROOT / "bench" / "receiver.py"), "--port", str(PORT)], workdir / "receiver.log", b""
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            await http("GET", "/stats")
            return receiver
        except aiohttp.ClientConnectionError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def main(
    runs: int,
    workers: list[int],
    chosen: list[str],
    loops: list[str],
    skip_ceilings: bool,
    scale: float,
    attempt_logs: list[bool],
) -> list[Verdict]:
    """Runs and prints everything asked for; returns issue 13's targets that these workloads measure."""
    verdicts: list[Verdict] = []
    if PROFILE and not (Path(PY).parent / "py-spy").exists():
        raise SystemExit(f"WARREN_BENCH_PROFILE needs py-spy beside {PY}: {Path(PY).parent}/pip install py-spy")
    workdir = Path(tempfile.mkdtemp(prefix="warren-bench-"))
    receiver = await start_receiver(workdir)
    try:
        print(heading("Warren benchmark", runs, scale))
        attempt_log_lines: list[str] = []
        if not skip_ceilings:
            ceiling_rows = [await ceilings(workdir) for _ in range(runs)]
            print("\n## Ceilings (same machine, same run)")
            for key in ("publish_confirmed_per_s", "consume_ack_per_s", "aiohttp_post_per_s"):
                print(
                    f"- {key}: {median(ceiling_rows, key):,.0f}/s  (runs: "
                    f"{', '.join(f'{r[key]:,.0f}' for r in ceiling_rows)})"
                )
        print("\n## Workloads")
        both_loops = len(loops) > 1
        print(
            "| workload | system | fixed rate/s | publish/s | deliveries/s | per CPU-s | p50 ms | p99 ms | lost "
            "| requests | CPU-s per 1k: worker / broker / machine | deliveries/s vs bare, same loop (per run) "
            "| per CPU-s vs bare, same loop (per run) |"
            + (
                " uvloop vs asyncio: deliveries/s (per run) | uvloop vs asyncio: per CPU-s (per run) |"
                if both_loops
                else ""
            )
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if both_loops else ""))
        # The capacity a fixed-rate workload takes half of: the first Warren system's median deliveries/s.
        reference = System(workers[0], loops[-1], attempt_logs[0])
        capacity: dict[str, float] = {}
        for name in chosen:
            workload = WORKLOADS[name]
            rate = 0.0
            if workload.half_of is not None:
                if workload.half_of not in capacity:  # not measured in this run yet: measure it once
                    probe = await one_run(WORKLOADS[workload.half_of], reference, workdir, scale=scale)
                    capacity[workload.half_of] = probe["deliveries_per_s"]
                rate = capacity[workload.half_of] / 2
            systems = [System(n, loop, on) for n in workers for loop in loops for on in attempt_logs]
            systems += [System(0, loop) for loop in loops] if workload.bare else []
            results: dict[System, list[dict[str, float]]] = {s: [] for s in systems}
            for _ in range(runs):
                for system in systems:  # interleaved, so drift in the machine's speed hits every system alike
                    results[system].append(await one_run(workload, system, workdir, rate, scale))
            capacity[name] = median(results[reference], "deliveries_per_s")
            attempt_log_lines += attempt_log_rows(name, results)
            for system, rows in results.items():
                bare_rows = results.get(System(0, system.loop))
                vs_bare = vs_bare_cpu = "-"
                if bare_rows and system.workers:
                    if not rate:  # at a fixed rate both deliver at that rate: compare CPU only
                        vs_bare = per_run_ratio(rows, bare_rows, "deliveries_per_s")
                    vs_bare_cpu = per_run_ratio(rows, bare_rows, "per_cpu_s")
                if bare_rows and not rate and system == System(1, "uvloop") and name in ("happy", "slow"):
                    pairs = pair_ratios(rows, bare_rows, "deliveries_per_s")
                    what = f"{name}: 1 worker / bare loop, deliveries/s"
                    verdicts.append(Verdict.ratio_at_least(what, pairs, VS_BARE_TARGET))
                if rate and system.workers and name in P99_TARGET_MS:
                    p99, limit = median(rows, "p99_ms"), P99_TARGET_MS[name]
                    verdicts.append(Verdict(f"{name}: p99 at {rate:,.0f}/s", p99, f"< {limit:g} ms", p99 < limit))
                line = (
                    f"| {name} | {system.name} | {f'{rate:,.0f}' if rate else '-'} | "
                    f"{median(rows, 'publish_per_s'):,.0f} | "
                    f"{median(rows, 'deliveries_per_s'):,.0f} | {median(rows, 'per_cpu_s'):,.0f} | "
                    f"{median(rows, 'p50_ms'):,.1f} | {median(rows, 'p99_ms'):,.1f} | "
                    f"{lost_cell(rows)} | {median(rows, 'requests'):,.0f} | {cpu_cell(rows)} | "
                    f"{vs_bare} | {vs_bare_cpu} |"
                )
                asyncio_rows = results.get(System(system.workers, "asyncio", system.attempt_log))
                if both_loops:
                    vs_asyncio = vs_asyncio_cpu = "-"
                    if asyncio_rows and system.loop != "asyncio":
                        vs_asyncio = per_run_ratio(rows, asyncio_rows, "deliveries_per_s")
                        vs_asyncio_cpu = per_run_ratio(rows, asyncio_rows, "per_cpu_s")
                    line += f" {vs_asyncio} | {vs_asyncio_cpu} |"
                print(line, flush=True)
        if attempt_log_lines:
            print("\n## The attempt log's cost: on vs off, same system, side by side")
            print(
                "| workload | system | off: deliveries/s | on: deliveries/s | on vs off: deliveries/s (per run) "
                "| on vs off: per CPU-s (per run) | records drained (fewest) |"
            )
            print("|---|---|---:|---:|---:|---:|---:|")
            print("\n".join(attempt_log_lines))
        print(f"\nload average at the end: {load_average()}")
    finally:
        with contextlib.suppress(Exception):  # the last run's first deliveries dumped too (WARREN_BENCH_LATENCY_DUMP)
            await http("POST", "/reset", {})
        receiver.send_signal(signal.SIGTERM)
        await receiver.wait()
    return verdicts


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--loops", default="uvloop", help="uvloop, asyncio, or both: asyncio,uvloop")
    parser.add_argument("--skip-ceilings", action="store_true", help="do not measure the machine's ceilings")
    parser.add_argument("--scale", type=float, default=1.0, help="events per workload, times this (0.25: a quarter)")
    parser.add_argument(
        "--attempt-log",
        default="off",
        choices=["off", "on", "both"],
        help="Warren's workers with worker.attempt_log off, on, or both side by side (their cost compared)",
    )
    a = parser.parse_args()
    loops = a.loops.split(",")
    if not set(loops) <= {"uvloop", "asyncio"}:
        parser.error("--loops takes uvloop and/or asyncio")
    asyncio.run(
        main(
            a.runs,
            counts(a.workers),
            a.workloads.split(","),
            loops,
            a.skip_ceilings,
            a.scale,
            {"off": [False], "on": [True], "both": [False, True]}[a.attempt_log],
        )
    )
