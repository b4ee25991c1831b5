"""Load generator for the ingest API: how many events per second `warren api` stores (202 = RabbitMQ confirmed).

    /tmp/venv/bin/python bench/ingest_load.py [--runs 3] [--duration 8] [--concurrency 32] [--batch-size 100]

Declares a fresh topology (one endpoint subscribed to ``bench.#``, quorum queues) under a random prefix on the
RabbitMQ of $WARREN_BENCH_AMQP_URL, starts ``warren api`` as its own process, then drives it from this process
with an asyncio aiohttp client on 127.0.0.1: ``--concurrency`` keep-alive connections posting single events,
then batches. Every run is bounded by ``--duration`` seconds; the queue is purged between runs. Prints each run
and the median per mode, as text and as one JSON line. Everything it declared is deleted at the end.

With ``--url`` it drives a server that is already running (and declares nothing); ``--profile DIR`` runs the
server under pyinstrument and writes its text report there.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cpu import process_seconds
from bench.topology_teardown import teardown
from tests.support.processes import write_config
from warren.broker.applier import apply_setup
from warren.broker.management import ManagementClient
from warren.topology import names
from warren.topology.config import WarrenConfig

AMQP = os.environ.get("WARREN_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
MGMT = os.environ.get("WARREN_BENCH_MANAGEMENT_URL", "http://guest:guest@127.0.0.1:15672")
PORT = int(os.environ.get("WARREN_BENCH_API_PORT", "18090"))
TOKEN = "bench-token-0123456789abcdef"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@dataclass
class RunResult:
    mode: str
    events: int
    requests: int
    seconds: float
    statuses: Counter[int]
    latencies_ms: list[float]
    server_cpu: float | None = None  # CPU seconds the API process used during the run
    load: float = 0.0  # the machine's 1-minute load average at the end of the run

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms) or [0.0]
        return {
            "mode": self.mode,
            "events_per_s": round(self.rate),
            "requests_per_s": round(self.requests / self.seconds),
            "events": self.events,
            "seconds": round(self.seconds, 2),
            "p50_ms": round(lat[len(lat) // 2], 2),
            "p99_ms": round(lat[int(len(lat) * 0.99)], 2),
            "statuses": {str(k): v for k, v in self.statuses.items()},
            "server_cpu_s": round(self.server_cpu, 2) if self.server_cpu is not None else None,
            "events_per_server_cpu_s": round(self.events / self.server_cpu) if self.server_cpu else None,
            "load1": self.load,
        }


def event(n: int, size: int) -> dict[str, Any]:
    return {"type": "bench.created", "data": {"n": n, "pad": "x" * max(0, size - 40)}, "key": f"k{n % 1000}"}


async def drive(url: str, mode: str, duration: float, concurrency: int, batch_size: int, size: int) -> RunResult:
    """``concurrency`` clients post back to back for ``duration`` seconds; only 202s count as stored events."""
    if mode == "single":
        path, body, per_request = "/v1/events", orjson.dumps(event(0, size)), 1
    else:
        path = "/v1/events/batch"
        body = orjson.dumps({"events": [event(i, size) for i in range(batch_size)]})
        per_request = batch_size
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:
        started = time.perf_counter()
        deadline = started + duration

        async def client() -> None:
            while (now := time.perf_counter()) < deadline:
                async with session.post(url + path, data=body, headers=headers) as response:
                    await response.read()
                    statuses[response.status] += 1
                latencies.append((time.perf_counter() - now) * 1000)

        await asyncio.gather(*(client() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    return RunResult(mode, statuses[202] * per_request, sum(statuses.values()), seconds, statuses, latencies)


def config_for(prefix: str) -> WarrenConfig:
    return WarrenConfig(
        broker={"url": AMQP, "management_url": MGMT, "prefix": prefix},
        retry={"base": "50ms", "cap": "500ms"},
        delivery={"allow_private_networks": True},
        api={"tokens": [TOKEN], "host": "127.0.0.1", "port": PORT, "max_batch": 1000},
        endpoints=[{"name": "bench", "url": "http://127.0.0.1:9/hook", "secret": SECRET, "events": ["bench.#"]}],
    )


async def purge(config: WarrenConfig) -> None:
    async with ManagementClient.from_settings(config.broker) as api:
        queue = names.work_queue(config.broker.prefix, "bench")
        await api.request("DELETE", f"queues/{api.vhost.replace('/', '%2F')}/{queue}/contents")


async def start_api(path: Path, log: Path, profile: str | None) -> asyncio.subprocess.Process:
    command = [sys.executable, "-m", "warren", "api", "--config", str(path)]
    if profile:
        command = [
            sys.executable,
            "-m",
            "pyinstrument",
            "-r",
            "text",
            "-o",
            f"{profile}/ingest-api.txt",
            "-m",
            "warren",
            "api",
            "--config",
            str(path),
        ]
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(*command, stdout=out, stderr=out)
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{PORT}/readyz") as response:
                    if response.status == 200:
                        return process
            except aiohttp.ClientConnectionError:
                pass
            if process.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(f"warren api did not get ready:\n{log.read_text()[-2000:]}")
            await asyncio.sleep(0.1)


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return f"{os.cpu_count()} CPU ({cpu}), Python {platform.python_version()}, {platform.system()} {platform.release()}"


async def main(args: argparse.Namespace) -> None:
    modes = args.modes.split(",")
    results: dict[str, list[RunResult]] = {m: [] for m in modes}
    config = config_for(f"ingest{uuid.uuid4().hex[:6]}")
    process: asyncio.subprocess.Process | None = None
    url = args.url or f"http://127.0.0.1:{PORT}"
    try:
        if not args.url:
            await apply_setup(config)
            workdir = Path(tempfile.mkdtemp(prefix="warren-ingest-bench-"))
            path = write_config(workdir, config, "warren.toml")
            process = await start_api(path, workdir / "api.log", args.profile)
        for run in range(args.runs):
            for mode in modes:
                clients = args.batch_concurrency if mode == "batch" else args.concurrency
                pid = process.pid if process is not None else None
                before = process_seconds(pid)
                result = await drive(url, mode, args.duration, clients, args.batch_size, args.size)
                after = process_seconds(pid)
                if before is not None and after is not None:
                    result.server_cpu = after - before
                result.load = round(os.getloadavg()[0], 2)
                results[mode].append(result)
                print(f"run {run + 1} {mode:>6}: {orjson.dumps(result.summary()).decode()}", flush=True)
                if not args.url:
                    await purge(config)
    finally:
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 30)
        if not args.url:
            await teardown(config)
    medians = {m: round(statistics.median(r.rate for r in runs)) for m, runs in results.items()}
    per_cpu = {
        m: round(statistics.median(r.events / r.server_cpu for r in runs if r.server_cpu))
        for m, runs in results.items()
        if any(r.server_cpu for r in runs)
    }
    print(f"machine: {machine()}")
    for mode, rate in medians.items():
        unit = f" (batches of {args.batch_size})" if mode == "batch" else ""
        cpu = f"; {per_cpu[mode]} events per CPU-second of the API process" if mode in per_cpu else ""
        print(f"median of {args.runs} runs, {mode}{unit}: {rate} events/s{cpu}")
    print(
        orjson.dumps(
            {
                "medians_events_per_s": medians,
                "medians_events_per_server_cpu_s": per_cpu,
                "concurrency": args.concurrency,
                "batch_concurrency": args.batch_concurrency,
                "batch_size": args.batch_size,
                "size": args.size,
                "duration": args.duration,
            }
        ).decode()
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per run and mode")
    parser.add_argument("--concurrency", type=int, default=32, help="connections posting single events back to back")
    parser.add_argument("--batch-concurrency", type=int, default=8, help="connections posting batches back to back")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--size", type=int, default=300, help="approximate bytes of each event's data")
    parser.add_argument("--modes", default="single,batch")
    parser.add_argument("--url", help="drive an already running API instead of starting one")
    parser.add_argument("--profile", help="directory: run the server under pyinstrument and write its report")
    asyncio.run(main(parser.parse_args()))
