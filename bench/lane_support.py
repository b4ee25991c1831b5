"""What the lane scale measures share: a deployment with lanes on a unique prefix, processes, the node's figures.

Used by ``bench/lane_creates.py`` (creates through the admin API) and ``bench/lane_store.py`` (100,000 endpoints
in the store and the stream). Everything runs on the node ``WARREN_BENCH_AMQP_URL`` points at, on its default
vhost, under a prefix of the run's own; ``cleanup`` deletes every queue and exchange of that prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from warren.broker.management import ManagementClient
from warren.topology.config import WarrenConfig

AMQP = os.environ.get("WARREN_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
MGMT = os.environ.get("WARREN_BENCH_MANAGEMENT_URL", "http://guest:guest@127.0.0.1:15672")
STORE_KEY = "yNoS0mDUEt0Uc1ryk8rHQ3zT6cN0zYyMxGxKZ9n6bWo="  # a bench key (the tests' too), never a real one
TOKEN, ADMIN_TOKEN = "bench-token-0123456789abcdef", "bench-admin-token-0123456789abcdef"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
STATS_INTERVAL = 5.5  # the management API refreshes node figures every 5 s


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def lane_config(prefix: str, store_url: str, api_port: int, lanes: int, **sections: Any) -> WarrenConfig:
    """No endpoint in the file: lanes on, a store with a key, the admin API, private addresses allowed."""
    return WarrenConfig(
        broker={"url": AMQP, "management_url": MGMT, "prefix": prefix},
        retry={"base": "100ms", "cap": "1s"},
        delivery={"allow_private_networks": True, "grace_period": "1s"},
        lanes={"count": lanes},
        store={"url": store_url, "keys": [STORE_KEY]},
        api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN], "host": "127.0.0.1", "port": api_port},
        **sections,
    )


def node_api() -> ManagementClient:
    parts = urlsplit(MGMT)
    base = f"{parts.scheme}://{parts.hostname}:{parts.port}"
    return ManagementClient(base, parts.username or "guest", parts.password or "guest", "/", timeout=120)


async def node_figures(api: ManagementClient, prefix: str, *, settle: bool = True) -> dict[str, float]:
    """The node's mem_used (MiB), its queue count, and the count of queues under ``prefix``.

    After the statistics interval when ``settle``: the management API refreshes the node's memory every 5 s."""
    if settle:
        await asyncio.sleep(STATS_INTERVAL)
    node = (await api.request("GET", "nodes?columns=name,mem_used,fd_used"))[0]
    queues = await api.request("GET", "queues?columns=name")
    return {
        "mem_used_mib": node["mem_used"] / 2**20,
        "fd_used": node.get("fd_used", 0),
        "queues": len(queues),
        "prefix_queues": sum(1 for q in queues if q["name"].startswith(prefix + ".")),
    }


async def cleanup(prefix: str) -> str:
    """Delete every queue and exchange named ``prefix.…`` on the default vhost; what was deleted, in words."""
    async with node_api() as api:
        queues = [q["name"] for q in await api.request("GET", "queues/%2F?columns=name")]
        exchanges = [e["name"] for e in await api.request("GET", "exchanges/%2F?columns=name")]
        mine_q = [q for q in queues if q.startswith(prefix + ".")]
        mine_x = [x for x in exchanges if x.startswith(prefix + ".")]
        for queue in mine_q:
            with contextlib.suppress(Exception):
                await api.request("DELETE", f"queues/%2F/{quote(queue, safe='')}")
        for exchange in mine_x:
            with contextlib.suppress(Exception):
                await api.request("DELETE", f"exchanges/%2F/{quote(exchange, safe='')}")
    return f"deleted {len(mine_q)} queues and {len(mine_x)} exchanges of {prefix}"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def warren(*args: str, log: Path) -> asyncio.subprocess.Process:
    """``warren ARGS`` as a process of its own, its output into ``log``."""
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(sys.executable, "-m", "warren", *args, stdout=out, stderr=out)


async def run_warren(*args: str, log: Path, timeout: float = 300) -> None:
    process = await warren(*args, log=log)
    code = await asyncio.wait_for(process.wait(), timeout)
    if code != 0:
        raise RuntimeError(f"warren {' '.join(args)} exited {code}: {log.read_text(errors='replace')[-800:]}")


async def wait_for_line(process: asyncio.subprocess.Process, log: Path, line: bytes, timeout: float) -> float:
    """Seconds until ``line`` appears in ``log`` (the process's output); raises if it ends or times out first."""
    started = time.monotonic()
    while line not in log.read_bytes():
        if process.returncode is not None or time.monotonic() - started > timeout:
            tail = log.read_text(errors="replace")[-800:].replace("\n", " | ")
            raise RuntimeError(f"{line.decode()!r} not seen within {timeout:.0f} s: {tail}")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def stop(process: asyncio.subprocess.Process | None) -> None:
    if process is None or process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), 30)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


class FirstArrivals:
    """A receiver on 127.0.0.1: the first arrival time (monotonic) of each endpoint, by the path's last word."""

    def __init__(self) -> None:
        self.first: dict[str, float] = {}
        self.arrived: dict[str, asyncio.Event] = {}
        self.count = 0
        self.runner: web.AppRunner | None = None
        self.url = ""

    def wait_for(self, name: str) -> asyncio.Event:
        return self.arrived.setdefault(name, asyncio.Event())

    async def _hook(self, request: web.Request) -> web.Response:
        await request.read()
        name = request.match_info["name"]
        self.count += 1
        if name not in self.first:
            self.first[name] = time.monotonic()
            self.wait_for(name).set()
        return web.Response(text="ok")

    async def __aenter__(self) -> FirstArrivals:
        app = web.Application()
        app.router.add_post("/hook/{name}", self._hook)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        port = free_port()
        await web.TCPSite(self.runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}/hook"
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
