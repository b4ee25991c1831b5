"""publish_many keeps each key's order when a publish fails: what is stored of a key is a prefix of its events.

Pure tests of the policy: ``Publisher.publish`` is replaced by a stand-in that records the order of sends,
holds each one a moment (so that pipelining shows), and fails the events it is told to fail.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.core.errors import PublishError, UnroutableError

pytestmark = pytest.mark.timeout(10)


class ScriptedPublisher(Publisher):
    def __init__(self, fail: dict[str, PublishError] | None = None, hold: float = 0.01) -> None:
        super().__init__(cast(Any, None), "events", None)
        self.fail = fail or {}
        self.hold = hold
        self.sent: list[str] = []
        self.in_flight: dict[str, int] = {}
        self.most_in_flight = 0
        self.most_per_key: dict[str, int] = {}

    async def publish(self, event: Event, **_: Any) -> str:
        self.sent.append(event.id)
        key = event.key or event.id
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        self.most_per_key[key] = max(self.most_per_key.get(key, 0), self.in_flight[key])
        self.most_in_flight = max(self.most_in_flight, sum(self.in_flight.values()))
        try:
            await asyncio.sleep(self.hold)
            if event.id in self.fail:
                raise self.fail[event.id]
            return event.id
        finally:
            self.in_flight[key] -= 1


def events(*spec: tuple[str, str | None]) -> list[Event]:
    return [Event(id=event_id, type="order.paid", key=key, data={}) for event_id, key in spec]


async def test_after_a_keys_event_fails_its_later_events_are_not_sent() -> None:
    publisher = ScriptedPublisher(fail={"a1": PublishError("nacked", "a1")})
    report = await publisher.publish_many(events(("a1", "a"), ("b1", "b"), ("a2", "a"), ("b2", "b"), ("a3", "a")))
    assert "a2" not in publisher.sent and "a3" not in publisher.sent
    assert report.confirmed == ["b1", "b2"]
    failed = dict(report.failed)
    assert set(failed) == {"a1", "a2", "a3"}
    assert "earlier event with key 'a' was not stored" in str(failed["a2"])


async def test_one_keys_events_go_one_at_a_time_and_other_keys_alongside() -> None:
    publisher = ScriptedPublisher()
    batch = events(*[(f"e{n}", f"k{n % 4}") for n in range(40)], *[(f"u{n}", None) for n in range(8)])
    report = await publisher.publish_many(batch)
    assert sorted(report.confirmed) == sorted(e.id for e in batch) and not report.failed
    assert max(publisher.most_per_key.values()) == 1
    assert publisher.most_in_flight >= 4 + 1  # the four keys and the unkeyed events overlap
    for k in range(4):
        mine = [i for i in publisher.sent if i.startswith("e") and int(i[1:]) % 4 == k]
        assert mine == sorted(mine, key=lambda i: int(i[1:]))


async def test_an_unroutable_event_does_not_hold_its_key() -> None:
    publisher = ScriptedPublisher(fail={"a1": UnroutableError("no endpoint", "a1")})
    report = await publisher.publish_many(events(("a1", "a"), ("a2", "a")))
    assert report.confirmed == ["a2"]
    assert [i for i, _ in report.failed] == ["a1"]


async def test_a_batch_cut_short_leaves_no_later_event_of_a_key_sent() -> None:
    """The API's publish timeout cancels the batch: a key's event still waiting for its predecessor is never sent."""
    publisher = ScriptedPublisher(hold=0.2)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await publisher.publish_many(events(("a1", "a"), ("a2", "a"), ("b1", "b")))
    await asyncio.sleep(0.3)
    assert sorted(publisher.sent) == ["a1", "b1"]


async def test_the_window_bounds_the_events_in_flight_and_keeps_it_full() -> None:
    """publish_many's own window (a count, not a semaphore since issue 38): never more than ``window`` at once, and
    the next event goes as soon as one is answered, failed or not."""
    publisher = ScriptedPublisher(fail={"u3": PublishError("nacked", "u3")}, hold=0.02)
    batch = events(*[(f"u{n}", None) for n in range(20)])
    report = await publisher.publish_many(batch, window=3)
    assert publisher.most_in_flight == 3
    assert sorted(report.confirmed) == sorted(f"u{n}" for n in range(20) if n != 3)
    assert [i for i, _ in report.failed] == ["u3"]


async def test_an_on_result_that_raises_fails_the_batch() -> None:
    """A task that raises is not forgotten (its task is kept until it ends well): publish_many raises it."""

    def record(event_id: str, error: PublishError | None) -> None:
        if event_id == "u1":
            raise RuntimeError("the caller's callback broke")

    publisher = ScriptedPublisher()
    with pytest.raises(RuntimeError, match="callback broke"):
        await publisher.publish_many(events(*[(f"u{n}", None) for n in range(5)]), window=2, on_result=record)
