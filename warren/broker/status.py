"""``warren status`` as data: per endpoint its queues, dead letters and circuit; the delay chain; rates.

Counts of ready messages and consumers come from AMQP (a passive declare: the queue's own answer at that
instant). Unacknowledged counts and rates only the management API knows; its figures are samples a few
seconds old, and the status says when it could not reach it or when the broker collects no metrics.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

from aio_pika.abc import AbstractConnection

from warren.broker.amqp.probe import QueueProbe
from warren.broker.live_set import API_MANAGED, FILE_MANAGED
from warren.broker.management import ManagementClient
from warren.core.errors import ManagementError
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology

__all__ = [
    "NO_METRICS",
    "RATE_WINDOW",
    "UNKNOWN",
    "DelayLevel",
    "EndpointStatus",
    "QueueRow",
    "Status",
    "collect_status",
    "rate_of",
]

RATE_WINDOW = 60  # seconds the rates are averaged over
# RabbitMQ 4.x can run without management metrics collection: queues are listed, with no message figures.
NO_METRICS = (
    "the broker collects no management metrics (management_metrics_collection is off); ready and consumer "
    "counts are exact over AMQP, unacknowledged counts and rates are not known"
)
UNKNOWN = "n/a"  # an endpoint state that could not be read
_STATS_QUERY = (
    f"msg_rates_age={RATE_WINDOW}&msg_rates_incr=5"
    "&columns=name,messages_unacknowledged,messages_dlx,message_stats.publish_details,message_stats.ack_details"
)


def rate_of(details: Mapping[str, Any] | None) -> float | None:
    """Messages per second over the sampled window, from the management API's ``*_details`` samples."""
    if not details:
        return None
    samples = sorted(
        (s["timestamp"], s["sample"]) for s in details.get("samples") or () if "timestamp" in s and "sample" in s
    )
    if len(samples) >= 2 and samples[-1][0] > samples[0][0]:
        (t0, v0), (t1, v1) = samples[0], samples[-1]
        return max(0.0, float(v1 - v0) * 1000 / float(t1 - t0))
    value = details.get("avg_rate", details.get("rate"))
    return float(value) if isinstance(value, int | float) else None


# The roles of the routing stage's rows in ``Status.routing`` (the text view groups them by these).
ROUTE_PARTITION_ROLE = "routing stage partition"
ROUTE_DLQ_ROLE = "routing stage dead letters"
ORDERED_LANE_ROLE = "ordered lane"


@dataclass(frozen=True)
class QueueRow:
    name: str
    role: str
    exists: bool
    ready: int  # exact (AMQP)
    consumers: int  # exact (AMQP)
    unacked: int | None  # management sample; None when unknown
    in_rate: float | None  # messages/s published into the queue, last minute
    ack_rate: float | None  # messages/s acknowledged from it, last minute
    # Management sample: messages a quorum queue's dead-letter worker holds (at-least-once dead-lettering) until
    # their next queue confirms them; neither ready nor unacked. In the delay chain: retries on their way back
    # that RabbitMQ sends again every dead_letter_worker_publisher_confirm_timeout (docs/cluster.md).
    held: int | None = None


@dataclass(frozen=True)
class EndpointStatus:
    name: str
    ordering: str
    queues: tuple[QueueRow, ...]  # the work queue, or the partitions
    dlq: QueueRow
    circuit: str  # the endpoint's health in one word: active, open, half-open, paused, disabled, throttled
    managed_by: str = FILE_MANAGED  # API_MANAGED: a live endpoint (created through the admin API), not in the file

    @property
    def ready(self) -> int:
        return sum(q.ready for q in self.queues)

    @property
    def unacked(self) -> int | None:
        values = [q.unacked for q in self.queues]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    @property
    def consumers(self) -> int:
        return sum(q.consumers for q in self.queues)

    def rate(self, which: str) -> float | None:
        values = [getattr(q, which) for q in self.queues]
        return None if all(v is None for v in values) else sum(v for v in values if v is not None)


@dataclass(frozen=True)
class DelayLevel:
    level: int
    ttl_ms: int
    queue: QueueRow


@dataclass(frozen=True)
class Status:
    taken_at_ms: int
    vhost: str
    prefix: str
    endpoints: tuple[EndpointStatus, ...]
    delay: tuple[DelayLevel, ...]  # shared by every endpoint: a message's endpoint is only in its routing key
    management_error: str | None  # why unacked counts and rates are missing, when they are
    # with lanes: the routing stage's partitions, its DLQ, then the ordered lanes (each row's role says which)
    routing: tuple[QueueRow, ...] = ()

    @property
    def retries_waiting(self) -> int:
        return sum(d.queue.ready for d in self.delay)

    @property
    def retries_held(self) -> int:
        """Retries the delay queues' dead-letter workers hold on their way back (management samples)."""
        return sum(d.queue.held or 0 for d in self.delay)

    def to_json(self) -> dict[str, Any]:
        """A plain document for ``--json``: every count, with the per-endpoint totals precomputed."""
        document = asdict(self)
        for item, endpoint in zip(document["endpoints"], self.endpoints, strict=True):
            item["totals"] = {
                "ready": endpoint.ready,
                "unacked": endpoint.unacked,
                "consumers": endpoint.consumers,
                "in_rate": endpoint.rate("in_rate"),
                "ack_rate": endpoint.rate("ack_rate"),
                "dead": endpoint.dlq.ready,
            }
        document["retries_waiting"] = self.retries_waiting
        document["retries_held"] = self.retries_held
        return document


async def _management_stats(api: ManagementClient | None) -> tuple[dict[str, Mapping[str, Any]], str | None]:
    if api is None:
        return {}, "management API not used"
    try:
        overview = await api.overview()
        rows = await api.request("GET", f"queues/{quote(api.vhost, safe='')}?{_STATS_QUERY}")
    except ManagementError as exc:
        return {}, str(exc)
    return queue_stats(overview, rows or [])


def queue_stats(
    overview: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Mapping[str, Any]], str | None]:
    """The management API's queue rows by name, or none and why when the broker collects no metrics.

    Without metrics collection (a RabbitMQ 4.x setting) the overview says ``disable_stats`` and queues are
    still listed, with no message figures. (A queue just declared lacks them too, for a few seconds: that
    is a sample not arrived yet, shown as such, not a broker without metrics.)
    """
    if overview.get("disable_stats") is True:
        return {}, NO_METRICS
    return {str(row["name"]): row for row in rows}, None


async def collect_status(
    config: WarrenConfig,
    connection: AbstractConnection,
    api: ManagementClient | None,
    endpoints: Sequence[str] | None = None,
    states: Mapping[str, str] | None = None,
    live: Collection[str] = (),
) -> Status:
    """One snapshot of every configured endpoint (or those named) and of the delay chain.

    ``states`` is each endpoint's health in one word (active, open, half-open, paused, disabled, throttled),
    read by the caller from the fleet's state stream; an endpoint missing from it shows ``n/a``. ``live`` names
    the endpoints of ``config`` that are live (``managed_by`` api), not the file's.
    """
    prefix = config.broker.prefix
    plan = plan_topology(config)
    stats, management_error = await _management_stats(api)
    probe = QueueProbe(connection)

    async def row(name: str, role: str) -> QueueRow:
        depth = await probe.depth(name)
        sample = stats.get(name, {})
        message_stats = sample.get("message_stats") or {}
        unacked = sample.get("messages_unacknowledged")
        held = sample.get("messages_dlx")
        return QueueRow(
            name,
            role,
            depth is not None,
            depth.ready if depth else 0,
            depth.consumers if depth else 0,
            unacked if isinstance(unacked, int) else None,
            rate_of(message_stats.get("publish_details")) if sample else None,
            rate_of(message_stats.get("ack_details")) if sample else None,
            held if isinstance(held, int) else None,
        )

    try:
        result: list[EndpointStatus] = []
        for endpoint in config.endpoints:
            if endpoints and endpoint.name not in endpoints:
                continue
            rows: tuple[QueueRow, ...]
            if endpoint.home == "lane":
                # A lane endpoint has no queue of its own: its lane's, shared with the lane's other endpoints.
                lane = names.lane_of(endpoint.name, config.lanes.count)
                rows = (await row(names.lane_queue(prefix, lane), f"lane {lane} (shared)"),)
                if endpoint.ordering == "key":  # an ordered lane endpoint held has a park queue (ordered_parks.py)
                    park = await row(names.ordered_park_queue(prefix, endpoint.name), "parked while held")
                    rows = (*rows, park) if park.exists else rows
                dead = await row(names.lane_dlq(prefix, lane), f"lane {lane} dead letters (shared)")
            else:
                queues = [q for q in plan.endpoint_queues(endpoint.name) if q.name != names.dlq(prefix, endpoint.name)]
                rows = tuple([await row(q.name, q.role) for q in queues])
                dead = await row(names.dlq(prefix, endpoint.name), "dead letters")
            result.append(
                EndpointStatus(
                    endpoint.name,
                    endpoint.ordering,
                    rows,
                    dead,
                    (states or {}).get(endpoint.name, UNKNOWN),
                    API_MANAGED if endpoint.name in live else FILE_MANAGED,
                )
            )
        delay = tuple(
            [
                DelayLevel(level, 1 << level, await row(names.delay_queue(prefix, level), f"delay 2^{level} ms"))
                for level in range(plan.delay_levels)
            ]
        )
        routing: tuple[QueueRow, ...] = ()
        if config.lanes.count:
            partitions = [names.route_partition(prefix, i) for i in range(config.lanes.route_partitions)]
            ordered = [names.ordered_lane_queue(prefix, i) for i in range(config.lanes.ordered_count)]
            routing = (
                *[await row(name, f"{ROUTE_PARTITION_ROLE} {i}") for i, name in enumerate(partitions)],
                await row(names.route_dlq(prefix), ROUTE_DLQ_ROLE),
                *[await row(name, f"{ORDERED_LANE_ROLE} {i}") for i, name in enumerate(ordered)],
            )
    finally:
        await probe.close()
    return Status(int(time.time() * 1000), config.broker.vhost, prefix, tuple(result), delay, management_error, routing)
