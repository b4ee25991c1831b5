"""Declare a configuration's topology for a test, as ``warren setup`` does minus the drift report."""

from __future__ import annotations

from warren.broker.amqp.connection import connect_once
from warren.broker.applier import declare_plan
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology


async def declare(config: WarrenConfig) -> None:
    """Declare every object of the configuration's plan through AMQP, with the applier's own declare."""
    connection = await connect_once(config.broker.url, name="warren-test-declare")
    try:
        await declare_plan(connection, plan_topology(config))
    finally:
        await connection.close()
