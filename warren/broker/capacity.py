"""Can the node hold the plan? RabbitMQ 3.10's file-handle cache, checked before setup declares anything.

Measured on RabbitMQ 3.10.8 (docs/deployment.md, "Open files and the number of endpoints"): every quorum queue
member takes 3 handles of its node's file-handle cache for as long as it exists, idle or not; classic queues
and streams take none while idle, and every AMQP connection takes one. The cache's limit is the node's
open-files limit less 97 (927 for 1024; ``file_handles_high_watermark`` overrides it). Past the limit the cache
blocks every new socket: the node still accepts TCP but never reads an AMQP handshake, on every vhost, until
queues are deleted. Nothing warns: the declares that cross the limit succeed.

RabbitMQ 4.x has no file-handle cache (the management API reports ``sockets_total`` 0) and its idle quorum
queues hold no file descriptor, so there is nothing of this kind to check there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from warren.broker.management import ManagementClient

__all__ = [
    "HANDLES_PER_QUORUM_QUEUE",
    "NodeHandles",
    "capacity_problems",
    "handle_limit",
    "minimum_open_files",
    "problems_adding",
    "quorum_room",
    "read_nodes",
    "reserve",
]

HANDLES_PER_QUORUM_QUEUE = 3
# The cache's limit is the open-files limit less this (3.10.8's file_handle_cache: ``Ulimit - 100 + 3``).
CACHE_RESERVED = 97


def reserve(limit: int) -> int:
    """Handles kept free for connections (workers, the API, publishers): a tenth of the limit, 64 to 500."""
    return min(500, max(64, limit // 10))


def handle_limit(sockets_total: int) -> int | None:
    """The file-handle cache's limit, from the socket limit the management API reports (None: no cache, 4.x).

    3.10 derives the socket limit from the cache's: ``trunc(limit * 0.9 - 2)``; the inverse holds whatever set
    the limit (the open-files limit or ``file_handles_high_watermark``).
    """
    if sockets_total <= 0:
        return None
    return math.ceil((sockets_total + 2) / 0.9)


def minimum_open_files(handles: int) -> int:
    """The open-files limit under which a node's cache holds ``handles`` plus the connection reserve."""
    limit = handles
    while limit - reserve(limit) < handles:
        limit += 1
    return limit + CACHE_RESERVED


@dataclass(frozen=True)
class NodeHandles:
    """One running node's file-handle figures and the quorum queue members it already holds (all vhosts)."""

    name: str
    fd_total: int
    limit: int | None  # the file-handle cache's limit; None when the node has no such cache (RabbitMQ 4.x)
    sockets_used: int
    quorum_members: int

    @property
    def used(self) -> int:
        return HANDLES_PER_QUORUM_QUEUE * self.quorum_members + self.sockets_used


def _nodes(nodes: Iterable[Mapping[str, Any]], queues: Iterable[Mapping[str, Any]]) -> list[NodeHandles]:
    members: dict[str, int] = {}
    for queue in queues:
        if queue.get("type") != "quorum":
            continue
        for node in queue.get("members") or [queue.get("node")]:
            if node:
                members[node] = members.get(node, 0) + 1
    return [
        NodeHandles(
            str(node["name"]),
            int(node.get("fd_total") or 0),
            handle_limit(int(node.get("sockets_total") or 0)),
            int(node.get("sockets_used") or 0),
            members.get(node["name"], 0),
        )
        for node in nodes
        if node.get("running", True)
    ]


_NODE_COLUMNS = "nodes?columns=name,running,fd_total,sockets_total,sockets_used"


async def read_nodes(api: ManagementClient) -> list[NodeHandles]:
    """Every running node's figures: two management API calls, whatever the number of queues."""
    nodes = await api.request("GET", _NODE_COLUMNS)
    queues = await api.queue_table("queues", "name,type,node,members")
    return _nodes(nodes or [], queues or [])


async def problems_adding(api: ManagementClient, quorum_queues: Iterable[str]) -> list[str]:
    """``capacity_problems`` for declaring the quorum queues named (those the API's vhost lacks are new).

    One call where no node has a file-handle cache (RabbitMQ 4.x); on 3.10 a second lists every queue.
    """
    nodes = [n for n in await api.request("GET", _NODE_COLUMNS) or [] if n.get("running", True)]
    if not any(handle_limit(int(n.get("sockets_total") or 0)) for n in nodes):
        return []
    queues = await api.queue_table("queues", "name,vhost,type,node,members") or []
    existing = {q.get("name") for q in queues if q.get("vhost") == api.vhost}
    return capacity_problems(_nodes(nodes, queues), sum(1 for name in set(quorum_queues) if name not in existing))


def _fits(node: NodeHandles) -> int:
    """How many more quorum queues ``node`` holds before its cache reaches the connection reserve."""
    assert node.limit is not None
    room = node.limit - reserve(node.limit)
    return max(0, (room - node.used) // HANDLES_PER_QUORUM_QUEUE)


def quorum_room(nodes: Iterable[NodeHandles]) -> int | None:
    """How many more quorum queues every node can hold; None when no node has a file-handle cache (4.x)."""
    limited = [_fits(node) for node in nodes if node.limit is not None]
    return min(limited) if limited else None


def capacity_problems(nodes: Iterable[NodeHandles], new_quorum_queues: int) -> list[str]:
    """One line per node that could not hold ``new_quorum_queues`` more quorum queues; [] when all can.

    Every running node is assumed to get a member of each new queue (3.10's default for clusters of up to
    three nodes, and the worst case for larger ones).
    """
    if new_quorum_queues <= 0:
        return []
    problems = []
    for node in nodes:
        if node.limit is None:
            continue
        after = node.used + HANDLES_PER_QUORUM_QUEUE * new_quorum_queues
        if after <= node.limit - reserve(node.limit):
            continue
        fits = _fits(node)
        problems.append(
            f"node {node.name} cannot hold {new_quorum_queues} more quorum queues: on RabbitMQ 3.10 each takes "
            f"{HANDLES_PER_QUORUM_QUEUE} handles of the node's file-handle cache, which would then hold {after} of "
            f"its limit of {node.limit} (open-files limit {node.fd_total}; {node.quorum_members} quorum queues "
            f"and {node.sockets_used} connections there already; {reserve(node.limit)} kept for connections), and "
            f"past that limit the node accepts no new connection on any vhost until queues are deleted. "
            f"Raise the node's open-files limit to at least {minimum_open_files(after)} (LimitNOFILE in its "
            "systemd unit, `ulimit -n` before rabbitmq-server, or the container's nofile limit; "
            f'docs/deployment.md, "Open files"), or plan at most {fits} new quorum queues '
            "(fewer endpoints or partitions); `warren setup --skip-capacity-check` declares anyway"
        )
    return problems
