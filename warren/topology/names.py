"""Names of everything Warren declares: small pure functions, one per kind of object.

Every name starts with the configured prefix so that several deployments can share a vhost, and each
is stable: the same configuration always yields the same names (``warren setup`` relies on that).
"""

from __future__ import annotations

import hashlib

from warren.core.digits import is_ascii_digits

__all__ = [
    "ROUTE_STAGE",
    "UNTIL_ARGUMENT",
    "attempts_exchange",
    "attempts_queue",
    "attempts_rejected_queue",
    "control_exchange",
    "dead_exchange",
    "delay_due_exchange",
    "delay_exchange",
    "delay_queue",
    "dlq",
    "endpoint_exchange",
    "endpoint_of_work_key",
    "endpoints_exchange",
    "endpoints_stream",
    "events_exchange",
    "health_roster",
    "inbound_dead_key",
    "inbound_dlq",
    "inbound_queue",
    "is_runtime_queue",
    "lane_dead_key",
    "lane_dlq",
    "lane_of",
    "lane_queue",
    "operator_exchange",
    "ordered_lane_of",
    "ordered_lane_queue",
    "ordered_lane_roster",
    "ordered_moved_queue",
    "ordered_park_queue",
    "partition_owner",
    "partition_queue",
    "partition_roster",
    "probe_lock",
    "queue_endpoint",
    "route_dead_key",
    "route_dlq",
    "route_exchange",
    "route_partition",
    "route_queue",
    "route_roster",
    "state_queue",
    "tenant_routing_key",
    "tenants_exchange",
    "work_queue",
]


def events_exchange(prefix: str) -> str:
    """Where producers publish; routing key = event type."""
    return f"{prefix}.events"


def tenants_exchange(prefix: str) -> str:
    """Where events that name a tenant are published; routing key = ``<tenant>.<event type>``."""
    return f"{prefix}.tenants"


def tenant_routing_key(tenant: str, key: str) -> str:
    """The routing key (or binding pattern) of ``key`` for ``tenant`` on the tenants exchange: the tenant first."""
    return f"{tenant}.{key}"


def endpoint_exchange(prefix: str, endpoint: str) -> str:
    """One per endpoint, bound to the events exchange by the endpoint's event patterns."""
    return f"{prefix}.ep.{endpoint}"


def work_queue(prefix: str, endpoint: str) -> str:
    """The single work queue of an unordered endpoint (competing consumers)."""
    return f"{prefix}.ep.{endpoint}.q"


def partition_queue(prefix: str, endpoint: str, index: int) -> str:
    """Partition ``index`` of an ordered endpoint (single active consumer)."""
    return f"{prefix}.ep.{endpoint}.p{index:02d}"


def partition_owner(prefix: str, endpoint: str, index: int) -> str:
    """The exclusive queue a worker declares to claim partition ``index`` (gone with that worker's connection)."""
    return f"{partition_queue(prefix, endpoint, index)}.owner"


def partition_roster(prefix: str, endpoint: str) -> str:
    """The auto-delete queue every worker serving an ordered endpoint consumes: its consumers count them."""
    return f"{prefix}.ep.{endpoint}.roster"


def dlq(prefix: str, endpoint: str) -> str:
    """The endpoint's dead-letter queue."""
    return f"{prefix}.ep.{endpoint}.dlq"


def lane_queue(prefix: str, lane: int) -> str:
    """Lane ``lane``: a quorum queue shared by the lane endpoints that hash to it (``lane_of``)."""
    return f"{prefix}.lane.{lane}"


def lane_dlq(prefix: str, lane: int) -> str:
    """The dead-letter queue of lane ``lane``: its endpoints' dead letters, each naming its endpoint in a header."""
    return f"{prefix}.lane.{lane}.dlq"


def lane_dead_key(lane: int) -> str:
    """The routing key on the dead exchange for lane ``lane`` (the ``.`` keeps it apart from endpoint names)."""
    return f"lane.{lane}"


def route_queue(prefix: str) -> str:
    """The routing stage's input: every published event, fanned out by workers to the lane endpoints."""
    return f"{prefix}.route"


ROUTE_STAGE = (
    "(route)"  # the routing stage where an endpoint name goes: metrics' endpoint label, `warren dlq '(route)'`
)


def route_dlq(prefix: str) -> str:
    """The routing stage's dead letters: events not routed within ``[lanes] route_attempts`` attempts."""
    return f"{prefix}.route.dlq"


def route_dead_key() -> str:
    """The routing key on the dead exchange for the routing stage (the ``.`` keeps it apart from endpoint names)."""
    return "route.stage"


def route_exchange(prefix: str) -> str:
    """The routing stage's input: a consistent-hash exchange (header ``warren-key``) over the route partitions,
    bound ``#`` on the events and tenants exchanges (docs/architecture.md, "Routing partitioned by key")."""
    return f"{prefix}.route.hash"


def route_partition(prefix: str, index: int) -> str:
    """Route partition ``index``: a quorum queue with single active consumer, claimed by one routing worker."""
    return f"{prefix}.route.p{index}"


def route_roster(prefix: str) -> str:
    """The roster every routing worker consumes: its consumer count is the number of routers."""
    return f"{prefix}.route.roster"


def ordered_lane_queue(prefix: str, index: int) -> str:
    """Ordered lane ``index``: a quorum queue with single active consumer shared by ordered lane endpoints."""
    return f"{prefix}.lane.o{index}"


def ordered_lane_roster(prefix: str) -> str:
    """The roster every worker consuming ordered lanes consumes (the claims' fair share)."""
    return f"{prefix}.lane.ordered.roster"


def ordered_park_queue(prefix: str, endpoint: str) -> str:
    """A held ordered lane endpoint's park queue (ordered_parks.py): it exists only while the endpoint is parked."""
    return f"{prefix}.lane.park.{endpoint}"


def ordered_moved_queue(prefix: str, endpoint: str) -> str:
    """What a dedicated ordered endpoint's partitions held when it moved onto the ordered lanes, in order: drained
    before its park queue (warren/broker/live_demote_ordered.py); it exists only until then."""
    return f"{prefix}.lane.park.{endpoint}.moved"


def ordered_lane_of(endpoint: str, key: str, count: int) -> int:
    """The ordered lane of ``endpoint``'s key ``key`` among ``count`` (BLAKE2b of both, stable everywhere)."""
    return lane_of(f"{endpoint}\x00{key}", count)


def lane_of(endpoint: str, count: int) -> int:
    """The lane of ``endpoint`` among ``count``: a stable hash (BLAKE2b), the same in every process and release.

    Python's ``hash()`` would not do: it is salted per process, and every worker must agree.
    """
    if count < 1:
        raise ValueError("lane_of needs at least one lane")
    digest = hashlib.blake2b(endpoint.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


UNTIL_ARGUMENT = "x-warren-until"  # a demoted endpoint's retry binding (live_demote.py): epoch ms it is needed until


def endpoint_of_work_key(prefix: str, routing_key: str) -> str | None:
    """The endpoint whose work queue a delay-chain routing key returns to (``<bits>.{prefix}.ep.<name>.q``), or None.

    A demoted endpoint's retries come due into its lane under its old queue's name, naming no endpoint in a
    header (warren/broker/live_demote.py); this reads it back.
    """
    start = routing_key.rfind(f".{prefix}.ep.")
    if start < 0 or not routing_key.endswith(".q"):
        return None
    return queue_endpoint(prefix, routing_key[start + 1 :])


def inbound_queue(prefix: str, source: str) -> str:
    """The queue of webhooks received from an inbound source, consumed by ``warren inbox``."""
    return f"{prefix}.in.{source}"


def inbound_dlq(prefix: str, source: str) -> str:
    """The dead-letter queue of an inbound source."""
    return f"{prefix}.in.{source}.dlq"


def inbound_dead_key(source: str) -> str:
    """The routing key on the dead exchange for an inbound source (``in.`` keeps it apart from endpoint names)."""
    return f"in.{source}"


def dead_exchange(prefix: str) -> str:
    """The final dead-letter exchange (direct, routing key = endpoint name)."""
    return f"{prefix}.dead"


def delay_exchange(prefix: str, level: int) -> str:
    """The topic exchange that decides whether a message waits 2^level ms at this level."""
    return f"{prefix}.delay.l{level:02d}"


def delay_queue(prefix: str, level: int) -> str:
    """The queue where a message waits exactly 2^level ms (fixed ``x-message-ttl``)."""
    return f"{prefix}.delay.l{level:02d}.q"


def delay_due_exchange(prefix: str) -> str:
    """The last hop of the delay chain: routes a due message back to its queue by routing key."""
    return f"{prefix}.delay.due"


def control_exchange(prefix: str) -> str:
    """Fanout exchange on which workers share endpoint state changes."""
    return f"{prefix}.control"


def state_queue(prefix: str) -> str:
    """Durable last-value store of endpoint states, read by workers that start later."""
    return f"{prefix}.state"


def attempts_exchange(prefix: str) -> str:
    """Fanout exchange workers publish batches of attempt records on (the attempt log)."""
    return f"{prefix}.attempts"


def attempts_queue(prefix: str) -> str:
    """Quorum queue that holds attempt-record batches until the attempt-log writer stores them."""
    return f"{prefix}.attempts"


def attempts_rejected_queue(prefix: str) -> str:
    """Where the attempt-log writer moves a message of the attempts queue it cannot store (with the reason)."""
    return f"{prefix}.attempts.rejected"


def endpoints_exchange(prefix: str) -> str:
    """Fanout exchange on which live endpoint configurations are announced to every worker."""
    return f"{prefix}.endpoints"


def endpoints_stream(prefix: str) -> str:
    """The stream that remembers live endpoint configurations (latest record per endpoint wins)."""
    return f"{prefix}.endpoints.log"


def health_roster(prefix: str, endpoint: str) -> str:
    """Auto-delete queue each worker serving a rate- or in-flight-limited endpoint consumes: its consumers count them.

    Outside ``{prefix}.ep.``, so that ``warren setup`` never takes it for a leftover of the endpoint.
    """
    return f"{prefix}.health.{endpoint}.roster"


def probe_lock(prefix: str, endpoint: str) -> str:
    """Exclusive queue held by the one worker probing an open circuit (gone with that worker's connection)."""
    return f"{prefix}.health.{endpoint}.probe"


def operator_exchange(prefix: str) -> str:
    """Topic exchange of operator events (circuit opened, endpoint disabled, message exhausted, ...)."""
    return f"{prefix}.operator"


def queue_endpoint(prefix: str, queue: str) -> str | None:
    """The endpoint a work or partition queue belongs to, or None if the name is not one of those."""
    head = f"{prefix}.ep."
    if not queue.startswith(head):
        return None
    endpoint, _, tail = queue[len(head) :].rpartition(".")
    if not endpoint or not (tail == "q" or (tail.startswith("p") and is_ascii_digits(tail[1:]))):
        return None
    return endpoint


def is_runtime_queue(prefix: str, queue: str) -> bool:
    """Whether ``queue`` is one the workers declare while they run, never ``warren setup``.

    Partition claims and rosters (``{prefix}.ep.<endpoint>.pNN.owner``, ``{prefix}.ep.<endpoint>.roster``),
    health rosters and probe locks (``{prefix}.health.<endpoint>.roster|probe``). Setup, drift and prune
    leave them alone: they belong to live connections, and vanish with them.
    """
    head = f"{prefix}.ep."
    if queue.startswith((f"{prefix}.route.", f"{prefix}.lane.")):
        if queue.startswith(f"{prefix}.lane.park."):
            return True  # a held ordered lane endpoint's park queue and its drain lock (ordered_parks.py)
        return queue.endswith((".roster", ".owner"))  # the routers' and ordered lanes' roster and claims
    if queue.startswith(f"{prefix}.health."):
        return queue.endswith((".roster", ".probe"))
    if not queue.startswith(head):
        return False
    endpoint, _, tail = queue[len(head) :].partition(".")
    if not endpoint:
        return False
    if tail == "roster":
        return True
    partition, _, owner = tail.partition(".")
    return owner == "owner" and partition.startswith("p") and is_ascii_digits(partition[1:])
