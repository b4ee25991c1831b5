"""The plan as RabbitMQ definitions JSON, the file ``rabbitmqctl import_definitions`` and the management UI
("Import definitions") accept.

The output has the shape of a full (all-vhosts) export: every object names its vhost, and the vhost itself is
listed so that a global import into an empty broker creates it. Posting it to ``/api/definitions/{vhost}``
also works: a vhost-scoped import places the objects in that vhost and ignores the ``vhosts`` list.
Definitions carry no users, permissions or policies: Warren's topology needs none of them.
"""

from __future__ import annotations

from typing import Any

from warren.topology.plan import Binding, Exchange, Plan, Queue

__all__ = ["RABBITMQ_VERSION", "definitions"]

# Informational only (importers do not check it). It names the release the compose file runs, which is
# also the oldest line Warren supports well (quorum at-least-once dead-lettering needs 3.10 or later).
RABBITMQ_VERSION = "3.13.7"


def _exchange(exchange: Exchange, vhost: str) -> dict[str, Any]:
    return {
        "name": exchange.name,
        "vhost": vhost,
        "type": exchange.type,
        "durable": exchange.durable,
        "auto_delete": False,
        "internal": False,
        "arguments": dict(exchange.arguments),
    }


def _queue(queue: Queue, vhost: str) -> dict[str, Any]:
    return {
        "name": queue.name,
        "vhost": vhost,
        "durable": queue.durable,
        "auto_delete": False,
        "arguments": dict(queue.arguments),
    }


def _binding(binding: Binding, vhost: str) -> dict[str, Any]:
    return {
        "source": binding.source,
        "vhost": vhost,
        "destination": binding.destination,
        "destination_type": binding.destination_type,
        "routing_key": binding.routing_key,
        "arguments": dict(binding.arguments),
    }


def definitions(plan: Plan, vhost: str, *, rabbitmq_version: str = RABBITMQ_VERSION) -> dict[str, Any]:
    """Every exchange, queue and binding of ``plan`` in ``vhost``, as a definitions document (JSON-ready)."""
    return {
        "rabbit_version": rabbitmq_version,
        "rabbitmq_version": rabbitmq_version,
        "product_name": "RabbitMQ",
        "product_version": rabbitmq_version,
        "vhosts": [{"name": vhost}],
        "exchanges": [_exchange(e, vhost) for e in plan.exchanges],
        "queues": [_queue(q, vhost) for q in plan.queues],
        "bindings": [_binding(b, vhost) for b in plan.bindings],
    }
