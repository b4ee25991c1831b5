"""The shovel watch as a pure unit: a shovel whose parameter exists but which never starts is not waited out."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest

from warren.broker.dlq import shovel
from warren.core.errors import ReplayError


@dataclass
class Depth:
    ready: int


class NeverStartingShovel:
    """The management API as it answered in the hang: the parameter is there, /api/shovels never lists it."""

    vhost = "/"

    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def request(self, method: str, path: str, body: Any = None, *, allow_404: bool = False) -> Any:
        return {"name": path.rsplit("/", 1)[-1], "value": {}}

    async def shovel_status(self, name: str) -> dict[str, Any] | None:
        return None

    async def delete_shovel(self, name: str) -> None:
        self.deleted.append(name)


class StillFull:
    async def depth(self, queue: str) -> Depth:
        return Depth(3)


async def test_a_shovel_that_never_starts_is_removed_and_reported_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a start allowance of 0.2 s, and a shovel that never shows as started while the DLQ keeps its 3
    monkeypatch.setattr(shovel, "START_TIME", 0.2)
    monkeypatch.setattr(shovel, "POLL_INTERVAL", 0.01)
    api = NeverStartingShovel()
    watch = shovel._Watch(api, StillFull(), "w.replay.acme.r1", "w.ep.acme.dlq", 3, resumed=False)  # type: ignore[arg-type]
    # When it is watched with a 10-minute timeout
    started = time.monotonic()
    with pytest.raises(ReplayError, match=r"did not start within 0.2s.*3 message\(s\) are still in w.ep.acme.dlq"):
        await watch.run("acme", 600.0, None)
    # Then the watch gives up after the start allowance, not the timeout, and removes the shovel
    assert 0.2 <= time.monotonic() - started < 2.0
    assert api.deleted == ["w.replay.acme.r1"]
