"""Which endpoint a command names: one of the configuration file's, or a live one (created through the admin
API or ``warren endpoint create``), which RabbitMQ's endpoints stream remembers. Every command that takes an
endpoint's name finds it here, so that none serves the file's endpoints only."""

from __future__ import annotations

from warren.broker.live_set import read_live_endpoints, with_live_endpoints
from warren.common import EXIT_USAGE, fail, run
from warren.topology.config import WarrenConfig

__all__ = ["with_endpoint"]

LISTED = 10  # names an "unknown endpoint" error lists of each kind (a deployment may hold thousands)


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:LISTED]) or "none"
    return f"{shown} and {len(names) - LISTED} more" if len(names) > LISTED else shown


def with_endpoint(config: WarrenConfig, name: str) -> WarrenConfig:
    """``config`` holding endpoint ``name``: as it is when the file (or the store) has it, else with the live
    endpoints added (read from RabbitMQ only then). Exits 2, naming what is known, when neither has it."""
    if any(e.name == name for e in config.endpoints):
        return config
    live = run(read_live_endpoints(config))
    if name in live:
        return with_live_endpoints(config, live)
    known = [e.name for e in config.endpoints]
    fail(
        f"unknown endpoint {name!r} (in the configuration: {_some(known)}; live: {_some(sorted(live))})",
        EXIT_USAGE,
    )
