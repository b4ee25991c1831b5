"""Moving a live ordered endpoint between its partitions and the ordered lanes: the deployment, the endpoint and
the worker serving it that tests/consumers/test_ordered_moves.py and test_ordered_promotion.py share
(``failing_once`` is a fixture of tests/consumers/conftest.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest

from tests.support.health import wait_until
from tests.support.receiver import Receiver, Reply
from tests.support.topology import declare
from warren.broker.live_apply import apply_endpoint
from warren.consumers.ordered_lanes import OrderedLaneRunner
from warren.consumers.worker import Worker
from warren.topology.config import Endpoint, WarrenConfig

__all__ = ["LANES", "RETRY", "failing_once", "first_fails", "ledger", "moves_config", "serving_ledger"]

LANES = {"count": 2, "ordered_count": 2, "route_partitions": 2, "prefetch": 8, "route_prefetch": 8}
RETRY = {"base": "200ms", "cap": "400ms", "jitter": "none", "max_attempts": 1000}  # a key: 12 events >= 2.4 s


def ledger(receiver: Receiver, home: str) -> Endpoint:
    return Endpoint.model_validate(
        {
            "name": "ledger",
            "url": f"{receiver.url}/ledger",
            "secret": "whsec_" + "A" * 32,
            "events": ["x.*"],
            "ordering": "key",
            "partitions": 2,
            "home": home,
            "circuit": {"enabled": False},
        }
    )


def first_fails() -> Any:
    """Every event's first attempt answered 503, the next ones 200: each key's head retries in place."""
    seen: set[str] = set()

    def reply(_: Receiver, __: Any, body: bytes) -> Reply:
        event = orjson.loads(body)["key"] + ":" + str(orjson.loads(body)["sequence"])
        if event in seen:
            return Reply(200)
        seen.add(event)
        return Reply(503)

    return reply


async def moves_config(make_config: Callable[..., WarrenConfig], **lanes: Any) -> WarrenConfig:
    """A deployment for moves (``LANES``, with ``lanes`` over them), declared: keys retry in place for seconds."""
    config = make_config([], lanes={**LANES, **lanes}, retry=RETRY, worker={"rebalance_interval": "500ms"})
    await declare(config)
    return config


@pytest.fixture
async def failing_once(make_config: Callable[..., WarrenConfig], receiver: Receiver) -> WarrenConfig:
    """A deployment for moves, declared, whose every event fails once at the receiver (503, then 200), so keys
    retry in place."""
    receiver.behaviour = first_fails()
    return await moves_config(make_config)


@contextlib.asynccontextmanager
async def serving_ledger(config: WarrenConfig, receiver: Receiver, home: str) -> AsyncIterator[Worker]:
    """A worker serving the ordered endpoint ``ledger``, applied live with ``home``: on the ordered lanes
    (``"lane"``) or on its partitions (``"dedicated"``)."""
    async with Worker(config) as worker:
        await apply_endpoint(config, ledger(receiver, home))
        on_lanes = home == "lane"
        await wait_until(
            lambda: (
                "ledger" in worker.runners and isinstance(worker.runners.get("ledger"), OrderedLaneRunner) == on_lanes
            ),
            10,
            f"served ({home})",
        )
        yield worker
