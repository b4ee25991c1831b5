"""The worker's HTTP side for operators: ``/metrics`` (Prometheus text), ``/healthz`` and ``/readyz``.

``/healthz`` answers 200 while the process and its event loop run. ``/readyz`` answers 200 only while the
worker is connected to RabbitMQ and consuming (the worker's ``is_ready``), 503 otherwise: during start-up, after a
lost connection until it is back, and during shutdown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from warren.consumers.hooks import DeliveryHooks
from warren.consumers.metrics import WorkerMetrics
from warren.core.errors import WarrenError
from warren.serving.guard import GuardedSite, ServerLimits
from warren.serving.server import guard_app
from warren.topology.config import Endpoint, WorkerSettings

__all__ = ["MetricsServer", "lane_label", "lane_series", "series_at_start", "serve_worker_metrics"]


class MetricsServer:
    """An aiohttp server on ``host:port`` (port 0 picks a free one; ``port`` tells which after ``start``)."""

    def __init__(
        self,
        metrics: WorkerMetrics,
        is_ready: Callable[[], bool],
        host: str,
        port: int,
        limits: ServerLimits | None = None,
    ) -> None:
        self.limits = limits or ServerLimits(max_connections=64)
        self.metrics = metrics
        self.is_ready = is_ready
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def _metrics(self, _: web.Request) -> web.Response:
        self.metrics.ready.set(1 if self.is_ready() else 0)
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        if self.is_ready():
            return web.Response(text="ready\n")
        return web.Response(status=503, text="not ready\n")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        guard = guard_app(app, self.limits)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = GuardedSite(self._runner, guard, self.host, self.port, backlog=128)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            self._runner = None
            raise WarrenError(f"cannot serve metrics on {self.host}:{self.port}: {exc.strerror or exc}") from exc
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])  # the port actually bound (asked for 0: a free one)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def serve_worker_metrics(
    settings: WorkerSettings,
    endpoints: Iterable[str],
    hooks: DeliveryHooks,
    *,
    in_flight: Callable[[], Mapping[str, int]],
    endpoint_states: Callable[[], Mapping[str, tuple[str, str]]],
    is_ready: Callable[[], bool],
    attempt_log: Callable[[], tuple[int, int]] | None = None,
    lane_of: Callable[[str], int | None] | None = None,
) -> MetricsServer | None:
    """Metrics for a worker wired into its hooks and served, when ``settings.metrics_port`` is set.

    The worker hands over callables (deliveries in flight per endpoint, circuit and admin states, readiness,
    the attempt log's dropped and buffered records when it records)
    rather than itself, so that this module does not import the worker. With ``worker.metrics_lane_endpoints =
    "by-lane"``, ``lane_of`` (an endpoint's lane, None for a dedicated one) puts lane endpoints' numbers in their
    lane's series (docs/operations.md, "Metrics at scale").
    """
    if settings.metrics_port is None:
        return None
    series = None
    if settings.metrics_lane_endpoints == "by-lane" and lane_of is not None:
        series = lane_series(lane_of)
        in_flight, endpoint_states = _summed(in_flight, series), _unusual_lane_states(endpoint_states, lane_of)
    metrics = WorkerMetrics(endpoints, series=series)
    metrics.install(hooks)
    metrics.track_in_flight(in_flight)
    metrics.track_endpoint_states(endpoint_states)
    if attempt_log is not None:
        metrics.track_attempt_log(attempt_log)
    limits = ServerLimits(settings.metrics_header_timeout, max_connections=settings.metrics_max_connections)
    server = MetricsServer(metrics, is_ready, settings.metrics_host, settings.metrics_port, limits)
    await server.start()
    return server


def series_at_start(endpoints: Iterable[Endpoint], lanes: int, settings: WorkerSettings) -> list[str]:
    """The series present from the start (at 0): every endpoint's, or with ``metrics_lane_endpoints = "by-lane"``
    and ``lanes`` on, the dedicated endpoints' and each lane's."""
    if settings.metrics_lane_endpoints == "each" or not lanes:
        return [e.name for e in endpoints]
    return [e.name for e in endpoints if e.home != "lane"] + [lane_label(n) for n in range(lanes)]


def lane_label(lane: int) -> str:
    """A lane's series, "(lane N)": no endpoint name has parentheses, so the two never meet."""
    return f"(lane {lane})"


def lane_series(lane_of: Callable[[str], int | None]) -> Callable[[str], str]:
    """An endpoint's series: its name, or for a lane endpoint its lane's (``lane_label``)."""

    def series(endpoint: str) -> str:
        lane = lane_of(endpoint)
        return endpoint if lane is None else lane_label(lane)

    return series


def _summed(source: Callable[[], Mapping[str, int]], series: Callable[[str], str]) -> Callable[[], dict[str, int]]:
    def summed() -> dict[str, int]:
        out: dict[str, int] = {}
        for endpoint, count in source().items():
            key = series(endpoint)
            out[key] = out.get(key, 0) + count
        return out

    return summed


def _unusual_lane_states(
    source: Callable[[], Mapping[str, tuple[str, str]]], lane_of: Callable[[str], int | None]
) -> Callable[[], dict[str, tuple[str, str]]]:
    """Dedicated endpoints' states, and lane endpoints' only while not closed and active: the ones to look at."""

    def states() -> dict[str, tuple[str, str]]:
        return {
            name: state for name, state in source().items() if state != ("closed", "active") or lane_of(name) is None
        }

    return states
