"""A long mixed run with periodic faults (issue 37, part 4): a bench, not a test.

    .venv/bin/python bench/long_run.py [--minutes 30] [--rate 20] [--report-every 5] [--out figures.json]

Runs as root on a machine with the system RabbitMQ packages: it starts a RabbitMQ node of its own (standalone,
``warrenlong@localhost``, AMQP 5831, management 15831, data under /tmp/warren-longrun; never the shared nodes at
5672 or 5682), declares four endpoints on it (unordered and ordered, each dedicated and on a shared lane), starts
two workers, and publishes ``--rate`` keyed events per second with ``Publisher.publish_many`` for ``--minutes``.
Faults, on a cycle of an eighth of the run: the broker killed with -9 and started again (once, half a cycle in,
inside the warm-up), then in turn a worker killed with -9 and started again 5 s later (always the second worker:
the first runs throughout, so its memory can be followed) and a receiver outage of 30 s (503 to every request, or
connection refused, alternately). Every ``--report-every`` minutes a row: events confirmed, per endpoint first
deliveries and duplicates, events confirmed over 3 minutes ago and not yet delivered (overdue), the steady worker's
and the broker's RSS and open file descriptors, and the queues' depth (the last sample and the smallest one since
the previous row: 0 means they emptied). After the load stops it waits until every confirmed event is delivered
(5 minutes at most) and the queues are empty, then gives the verdict: lost (must be 0), order violations, RSS
growth from the end of the warm-up (a third of the run) to the end (under 10%), queues back to zero.
Figures in docs/cluster.md ("A long run").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import SECRET, Broker, Process, Receiver, Seen, _bases, bench_config, endpoint_figures, fresh_vhost
from bench.partition import queued
from tests.support.processes import write_config
from warren.broker.amqp.connection import connect
from warren.broker.applier import apply_setup
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.broker.publisher import Publisher
from warren.topology.config import WarrenConfig

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
PLUGINS = "rabbitmq_management,rabbitmq_consistent_hash_exchange,rabbitmq_shovel,rabbitmq_prometheus"
ENDPOINTS = {"unordered": False, "ordered": True, "lane": False, "lane-ordered": True}  # name -> ordered
KEYS = 50
OVERDUE_S = 180.0
OUTAGE_S = 30.0


class OwnNode:
    """A standalone RabbitMQ node of this bench's own, run like scripts/cluster's nodes (as the rabbitmq user,
    a clean environment): started, killed by its own PID and started again; removed at the end. ``slot`` N > 0
    shifts its ports by N and names it ``warrenlongN`` (two runs side by side); ``wal_mib`` sets
    ``raft.wal_max_size_bytes`` (0: RabbitMQ's default, 512 MiB)."""

    def __init__(self, slot: int = 0, wal_mib: int = 0) -> None:
        self.name = f"warrenlong{slot or ''}@localhost"
        self.amqp, self.mgmt, self.prom, self.dist = (port + slot for port in (5831, 15831, 15931, 25831))
        self.dir = Path(os.environ.get("WARREN_LONGRUN_DIR", "/tmp/warren-longrun") + (f"-{slot}" if slot else ""))
        self.wal_mib = wal_mib
        urls = [f"amqp://guest:guest@127.0.0.1:{self.amqp}/"]
        self.broker = Broker(self.name, urls, [f"http://guest:guest@127.0.0.1:{self.mgmt}"])

    def _env(self) -> str:
        d = self.dir
        return (
            f"env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME={Path('~rabbitmq').expanduser()} LANG=C.UTF-8 "
            f"RABBITMQ_NODENAME={self.name} RABBITMQ_NODE_PORT={self.amqp} RABBITMQ_DIST_PORT={self.dist} "
            f"RABBITMQ_MNESIA_BASE={d}/mnesia RABBITMQ_LOG_BASE={d}/log RABBITMQ_PID_FILE={d}/pid "
            f"RABBITMQ_ENABLED_PLUGINS_FILE={d}/enabled_plugins RABBITMQ_CONFIG_FILE={d}/rabbitmq"
        )

    async def start(self) -> float:
        started = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = f"listeners.tcp.default = {self.amqp}\nmanagement.tcp.port = {self.mgmt}\n"
        conf += f"prometheus.tcp.port = {self.prom}\n"
        if self.wal_mib:
            conf += f"raft.wal_max_size_bytes = {self.wal_mib * 2**20}\n"
        (self.dir / "rabbitmq.conf").write_text(conf)
        (self.dir / "enabled_plugins").write_text(f"[{PLUGINS}].\n")
        for path in [self.dir, *self.dir.rglob("*")]:
            shutil.chown(path, "rabbitmq", "rabbitmq")
        await sh("su", "rabbitmq", "-s", "/bin/sh", "-c", f"ulimit -n 20000; {self._env()} {SERVER} -detached")
        # await_startup fails at once while the new VM has not registered with epmd yet: asked again until then.
        while True:
            try:
                await sh("rabbitmqctl", "-q", "-n", self.name, "await_startup", "--timeout", "10", timeout=30)
                return round(time.monotonic() - started, 1)
            except (RuntimeError, TimeoutError):
                if time.monotonic() - started > 180:
                    raise
                await asyncio.sleep(1)

    @property
    def pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.dir / "pid").read_text().strip())
            if Path(f"/proc/{pid}/exe").resolve().name == "beam.smp":
                return pid
        return None

    async def kill(self) -> None:
        if (pid := self.pid) is not None:
            os.kill(pid, signal.SIGKILL)
            while Path(f"/proc/{pid}").exists():
                await asyncio.sleep(0.1)

    async def remove(self) -> None:
        await self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


async def sh(*command: str, timeout: float = 60) -> None:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout)
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)}: {out.decode(errors='replace')[-800:]}")


def rss_mib(pid: int | None) -> float | None:
    with contextlib.suppress(OSError, ValueError, TypeError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def fds(pid: int | None) -> int | None:
    with contextlib.suppress(OSError, TypeError):
        return len(os.listdir(f"/proc/{pid}/fd"))
    return None


class OutageReceiver(Receiver):
    """bench.cluster's receiver, which can be taken down: ``refusing`` (its port closed) or ``failing`` (503)."""

    failing = False

    async def _hook(self, request: web.Request) -> web.Response:
        if self.failing:
            return web.Response(status=503, text="outage")
        return await super()._hook(request)

    async def outage(self, seconds: float, refuse: bool) -> None:
        if not refuse:
            self.failing = True
            await asyncio.sleep(seconds)
            self.failing = False
            return
        assert self._runner is not None
        for site in list(self._runner.sites):
            await site.stop()
        await asyncio.sleep(seconds)
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()


def long_config(broker: Broker, vhost: str, prefix: str, receiver: Receiver) -> WarrenConfig:
    common = {"secret": SECRET, "events": ["bench.#"], "timeout": "10s"}
    endpoints = [
        {**common, "name": name, "url": receiver.url(name), "home": "lane" if name.startswith("lane") else "dedicated"}
        | ({"ordering": "key", "partitions": 4} if ordered and name == "ordered" else {})
        | ({"ordering": "key"} if ordered and name != "ordered" else {})
        for name, ordered in ENDPOINTS.items()
    ]
    # An outage of 30 s is ridden through with room to spare: attempts every 2 s at most, 200 of them.
    retry = {"base": "200ms", "cap": "2s", "max_attempts": 200}
    lanes = {"count": 2, "ordered_count": 2}
    return bench_config(broker, vhost, prefix, endpoints, lanes=lanes, retry=retry, rebalance="5s")


class Run:
    def __init__(self, minutes: float, rate: int, report_every: float, node: OwnNode) -> None:
        self.total = minutes * 60
        self.rate = rate
        self.every = report_every * 60
        self.node = node
        self.memory: dict[str, float] = {}
        self.receiver = OutageReceiver()
        self.workers: list[Process] = []
        self.confirmed: dict[str, float] = {}  # id -> when confirmed (monotonic)
        self.not_stored = 0
        self.faults: list[dict[str, Any]] = []
        self.rows: list[dict[str, Any]] = []
        self.min_depth: int | None = None
        self.depth = 0
        self.t0 = 0.0
        self.workdir = Path(tempfile.mkdtemp(prefix="warren-longrun-work-"))

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def publish(self, config: WarrenConfig) -> None:
        connection = await connect(config.broker.urls, name="bench-longrun-publisher")
        try:
            publisher = await Publisher.open(connection, config.broker.prefix)
            n = 0
            while self.now() < self.total:
                tick = time.monotonic()
                batch = [
                    Event(type="bench.event", id=f"e-{i}", key=f"k{i % KEYS}", data={"n": i, "key": f"k{i % KEYS}"})
                    for i in range(n, n + self.rate)
                ]
                n += self.rate
                report = await publisher.publish_many(batch, deadline=120)
                at = time.monotonic()
                self.confirmed.update(dict.fromkeys(report.confirmed, at))
                self.not_stored += len(report.failed)
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        finally:
            await connection.close()

    async def start_worker(self, path: Path, index: int) -> Process:
        log = self.workdir / f"worker-{index}-{uuid.uuid4().hex[:4]}.log"
        return await Process(["worker", "--config", str(path)], log).start(b"worker consuming", timeout=120)

    async def fault_loop(self, path: Path) -> None:
        """The faults; one that fails ends them, and is in the figures (the verdict then fails)."""
        try:
            await self._faults(path)
        except Exception as error:
            self.faults.append({"at_s": round(self.now()), "fault": "the fault loop failed", "error": repr(error)})
            print(json.dumps(self.faults[-1]), flush=True)

    async def _faults(self, path: Path) -> None:
        cycle = self.total / 8
        await asyncio.sleep(max(0.0, cycle / 2 - self.now()))
        at = self.now()
        await self.node.kill()
        self.faults.append({"at_s": round(at), "fault": "broker kill -9 + start", "restart_s": await self.node.start()})
        for k in range(1, 8):
            await asyncio.sleep(max(0.0, k * cycle - self.now()))
            at = self.now()
            if k % 2:
                assert self.workers[1].process is not None
                self.workers[1].process.kill()
                await self.workers[1].process.wait()
                await asyncio.sleep(5)
                started = time.monotonic()
                self.workers[1] = await self.start_worker(path, k)
                self.faults.append(
                    {
                        "at_s": round(at),
                        "fault": "worker kill -9, started 5 s later",
                        "consuming_after_s": round(time.monotonic() - started, 1),
                    }
                )
            else:
                refuse = k % 4 == 0
                await self.receiver.outage(OUTAGE_S, refuse)
                self.faults.append(
                    {"at_s": round(at), "fault": f"receiver {'refusing' if refuse else '503'} for {OUTAGE_S:.0f} s"}
                )

    async def sample_depths(self, api: ManagementClient) -> None:
        while True:
            with contextlib.suppress(Exception):
                self.depth = sum((await queued(api)).values())
                self.min_depth = self.depth if self.min_depth is None else min(self.min_depth, self.depth)
                memory = (await api.request("GET", f"nodes/{self.node.name}/memory"))["memory"]
                # The quorum queues' WAL memtables (quorum_ets) and message bodies (binary): RabbitMQ holds
                # them until the WAL rolls over at raft.wal_max_size_bytes.
                # The whole breakdown (rabbitmq-diagnostics memory_breakdown's figures), MiB, to see what grows.
                self.memory = {k: round(v / 2**20, 1) for k, v in memory.items() if isinstance(v, int | float)}
            await asyncio.sleep(10)

    def row(self, label: str) -> dict[str, Any]:
        now = time.monotonic()
        owed = set(self.confirmed)
        old = {i for i, at in self.confirmed.items() if now - at > OVERDUE_S}
        row: dict[str, Any] = {"at": label, "confirmed": len(owed), "not_stored": self.not_stored}
        for name in ENDPOINTS:
            seen = self.receiver.paths.get(name, Seen())
            row[name] = {"delivered": len(seen.ok & owed), "duplicates": seen.duplicates, "overdue": len(old - seen.ok)}
        steady = self.workers[0].pid
        row |= {
            "worker_rss_mib": rss_mib(steady),
            "worker_fds": fds(steady),
            "broker_rss_mib": rss_mib(self.node.pid),
            "broker_fds": fds(self.node.pid),
            "broker_quorum_ets_mib": self.memory.get("quorum_ets"),
            "broker_binary_mib": self.memory.get("binary"),
            "broker_memory_mib": dict(sorted(self.memory.items(), key=lambda kv: -kv[1])),
            "queue_depth": self.depth,
            "queue_depth_min": self.min_depth,
        }
        self.min_depth = None
        print(json.dumps(row), flush=True)
        return row

    async def main(self) -> dict[str, Any]:
        await self.node.remove()
        figures: dict[str, Any] = {"minutes": self.total / 60, "rate_per_s": self.rate, "node": self.node.name}
        figures["node_start_s"] = await self.node.start()
        await self.receiver.start()
        tasks: list[asyncio.Task[None]] = []
        try:
            async with fresh_vhost(self.node.broker) as vhost:
                prefix = f"l{uuid.uuid4().hex[:6]}"
                config = long_config(self.node.broker, vhost, prefix, self.receiver)
                await apply_setup(config)
                path = write_config(self.workdir, config, f"{prefix}.toml")
                self.workers = [await self.start_worker(path, 0), await self.start_worker(path, 1)]
                async with ManagementClient(
                    _bases(self.node.broker.management), "guest", "guest", vhost, timeout=60
                ) as api:
                    self.t0 = time.monotonic()
                    tasks = [asyncio.create_task(c) for c in (self.sample_depths(api), self.fault_loop(path))]
                    publishing = asyncio.create_task(self.publish(config))
                    next_row = self.every
                    while not publishing.done():
                        await asyncio.wait([publishing], timeout=max(0.1, next_row - self.now()))
                        if self.now() >= next_row:
                            self.rows.append(self.row(f"{next_row / 60:g} min"))
                            next_row += self.every
                    await publishing
                    drained_at = time.monotonic()
                    owed = set(self.confirmed)
                    while time.monotonic() - drained_at < 300:
                        if all(owed <= self.receiver.paths.get(n, Seen()).ok for n in ENDPOINTS) and not self.depth:
                            break
                        await asyncio.sleep(1)
                    figures["drain_s"] = round(time.monotonic() - drained_at, 1)
                    await asyncio.sleep(15)  # late duplicates, and the depth sampler's next look
                    self.rows.append(self.row("end"))
                    figures["left_in_queues"] = await queued(api)
                    figures["confirmed"], figures["not_stored"] = len(owed), self.not_stored
                    for name, ordered in ENDPOINTS.items():
                        figures[name] = endpoint_figures(self.receiver.paths.get(name, Seen()), owed, ordered=ordered)
                    figures["workers_alive"] = all(w.alive for w in self.workers)
                    for task in tasks:
                        task.cancel()
                for worker in self.workers:
                    await worker.stop()
        finally:
            for task in tasks:
                task.cancel()
            for worker in self.workers:
                await worker.stop()
            await self.receiver.stop()
            await self.node.remove()
        figures |= {"faults": self.faults, "rows": self.rows, "verdict": self.verdict(figures)}
        figures["workdir"] = str(self.workdir)
        return figures

    def verdict(self, figures: dict[str, Any]) -> dict[str, Any]:
        """Growth from the first row at or past the warm-up (a third of the run) to the last."""
        warm = next((r for i, r in enumerate(self.rows) if (i + 1) * self.every >= self.total / 3), self.rows[0])
        last = self.rows[-1]

        def growth(key: str) -> float | None:
            return round(100 * (last[key] - warm[key]) / warm[key], 1) if warm[key] and last[key] else None

        lost = sum(figures[n]["lost"] for n in ENDPOINTS)
        faults_ok = len(self.faults) == 8 and not any("error" in f for f in self.faults)
        violations = sum(figures[n].get("order_violations", 0) for n in ENDPOINTS)
        worker, broker = growth("worker_rss_mib"), growth("broker_rss_mib")
        return {
            "lost": lost,
            "order_violations": violations,
            "worker_rss_growth_pct": worker,
            "broker_rss_growth_pct": broker,
            "warm_up_row": warm["at"],
            "queues_empty": not figures["left_in_queues"],
            "faults_applied": len(self.faults),
            "held": faults_ok
            and lost == 0
            and violations == 0
            and not figures["left_in_queues"]
            and figures["workers_alive"]
            and worker is not None
            and worker < 10
            and broker is not None
            and broker < 10,
        }


def table(figures: dict[str, Any]) -> str:
    """The rows as a Markdown table (docs/cluster.md's): per endpoint first deliveries / duplicates / overdue."""
    names = " | ".join(f"{n}: delivered · dup · overdue" for n in ENDPOINTS)
    lines = [
        f"| at | confirmed | {names} | worker RSS MiB · fds | broker RSS MiB (quorum_ets) · fds "
        "| queued (last · least) |",
        "|---|---:|" + "---:|" * len(ENDPOINTS) + "---:|---:|---:|",
    ]
    for r in figures["rows"]:
        cells = " | ".join(f"{r[n]['delivered']:,} · {r[n]['duplicates']} · {r[n]['overdue']}" for n in ENDPOINTS)
        lines.append(
            f"| {r['at']} | {r['confirmed']:,} | {cells} | {r['worker_rss_mib']} · {r['worker_fds']} | "
            f"{r['broker_rss_mib']} ({r.get('broker_quorum_ets_mib', '?')}) · {r['broker_fds']} | "
            f"{r['queue_depth']} · {r['queue_depth_min']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=int, default=20, help="events per second (each goes to four endpoints)")
    parser.add_argument("--report-every", type=float, default=5, help="minutes between rows")
    parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
    parser.add_argument("--wal-max-mib", type=int, default=0, help="raft.wal_max_size_bytes, MiB (default 512)")
    parser.add_argument("--slot", type=int, default=0, help="N > 0: ports +N, node warrenlongN (runs side by side)")
    parser.add_argument("--table", type=Path, help="only print the rows of figures written by --out, as Markdown")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    started = time.monotonic()
    figures = asyncio.run(Run(args.minutes, args.rate, args.report_every, OwnNode(args.slot, args.wal_max_mib)).main())
    figures["wall_s"] = round(time.monotonic() - started)
    text = json.dumps(figures, indent=2)
    print(text, "\n" + table(figures), flush=True)
    if args.out:
        args.out.write_text(text)
    sys.exit(0 if figures["verdict"]["held"] else 1)


if __name__ == "__main__":
    main()
