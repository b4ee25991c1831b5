"""The routing stage's filter hook (warren/consumers/admission.py ``wanted``): the body parsed once per event, and
only when a target has a filter; a body that is not an envelope is let through; each filtered endpoint told."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.conftest import TEST_SECRET
from warren.consumers import admission
from warren.consumers.admission import wanted
from warren.consumers.delivery import parse_delivery
from warren.core.filters import event_data
from warren.topology.config import Endpoint


def endpoint(name: str, **fields: Any) -> Endpoint:
    return Endpoint.model_validate(
        {"name": name, "url": "https://example.com/h", "secret": TEST_SECRET, "events": ["#"], **fields}
    )


def body(data: Any) -> bytes:
    return orjson.dumps({"id": "evt_1", "type": "order.paid", "timestamp": "2026-01-01T00:00:00Z", "data": data})


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every body ``wanted`` parses."""
    seen: list[bytes] = []

    def counting(raw: bytes) -> Any:
        seen.append(raw)
        return event_data(raw)

    monkeypatch.setattr(admission, "event_data", counting)
    return seen


def test_without_a_filter_among_the_targets_the_body_is_not_parsed(parses: list[bytes]) -> None:
    targets = [endpoint("a"), endpoint("b")]
    told: list[tuple[str, str]] = []
    assert wanted(targets, b"not even json", lambda *x: told.append(x)) is targets
    assert parses == [] and told == []


def test_with_filters_the_body_is_parsed_once_and_each_filtered_endpoint_is_told(parses: list[bytes]) -> None:
    # Given three targets with filters and one without
    targets = [
        endpoint("big", filter={"amount": {"$gt": 1000}}),
        endpoint("eu", filter={"region": "eu"}),
        endpoint("plain"),
        endpoint("small", filter={"amount": {"$lte": 1000}}),
    ]
    told: list[tuple[str, str]] = []
    # When an event of 1500 from the US is routed
    kept = wanted(targets, body({"amount": 1500, "region": "us"}), lambda *x: told.append(x))
    # Then its body was parsed once, it goes to those it passes, and the others are counted as filtered
    assert len(parses) == 1
    assert [e.name for e in kept] == ["big", "plain"]
    assert told == [("eu", "filtered"), ("small", "filtered")]


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'{"id": "evt_1", "type": "order.paid"}'])
def test_a_body_that_is_not_an_envelope_with_data_is_let_through_to_be_dead_lettered_where_delivered(
    raw: bytes,
) -> None:
    targets = [endpoint("big", filter={"amount": {"$gt": 1000}})]
    told: list[tuple[str, str]] = []
    assert wanted(targets, raw, lambda *x: told.append(x)) == targets and told == []


async def test_a_runners_filter_reads_the_envelope_it_parsed_without_parsing_the_body_again(
    parses: list[bytes],
) -> None:
    """``refused`` (a dedicated endpoint's runner, before the POST) takes the envelope ``parse_delivery`` kept."""
    acked: list[str] = []

    class Settler:
        async def ack(self, message: object, how: str) -> None:
            acked.append(how)

    big = endpoint("big", filter={"amount": {"$gt": 1000}})
    for amount, refused in ((1500, False), (10, True)):
        raw = body({"amount": amount})
        delivery = parse_delivery(raw, "evt_1", {}, 0, max_payload=10_000)
        assert delivery.envelope is not None
        assert await admission.refused(big, Settler(), object(), delivery) is refused  # type: ignore[arg-type]
    assert parses == []  # neither was parsed again
    assert acked == ["filtered"]
