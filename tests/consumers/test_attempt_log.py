"""The attempt log line: JSON fields and timestamps, as the worker writes it (pure: no broker)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest

from warren.consumers.attempt_log import JsonFormatter, configure_logging, log_attempt


def _record(second: int, msecs: int, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("warren.delivery", logging.INFO, "", 0, "attempt", None, None)
    record.created = second + msecs / 1000
    record.msecs = msecs
    record.__dict__.update(extra)
    return record


def test_each_line_has_its_own_second_and_milliseconds_though_the_second_is_formatted_once() -> None:
    formatter = JsonFormatter()
    first = orjson.loads(formatter.format(_record(1_764_581_404, 297, endpoint="a")))
    same_second = orjson.loads(formatter.format(_record(1_764_581_404, 999)))
    next_second = orjson.loads(formatter.format(_record(1_764_581_405, 4)))
    earlier = orjson.loads(formatter.format(_record(1_764_581_399, 500)))  # records may arrive out of order
    assert first["ts"] == "2025-12-01T09:30:04.297Z"
    assert first["endpoint"] == "a"
    assert same_second["ts"] == "2025-12-01T09:30:04.999Z"
    assert next_second["ts"] == "2025-12-01T09:30:05.004Z"
    assert earlier["ts"] == "2025-12-01T09:29:59.500Z"


@pytest.fixture
def configured() -> Iterator[io.StringIO]:
    """configure_logging("json") with its handler writing here; the root logger is restored after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("json")
    out = io.StringIO()
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(out)
    yield out
    root.handlers[:] = handlers
    root.setLevel(level)


def test_an_attempt_line_is_one_json_object_with_every_field_of_the_attempt(configured: io.StringIO) -> None:
    log_attempt(
        event_id="msg_1",
        endpoint="orders",
        attempt=2,
        status=503,
        error=None,
        duration=0.01234,
        outcome="retry",
        next_delay=1.5,
    )
    line = orjson.loads(configured.getvalue().splitlines()[-1])
    assert {k: v for k, v in line.items() if k != "ts"} == {
        "level": "warning",
        "logger": "warren.delivery",
        "msg": "attempt",
        "event_id": "msg_1",
        "endpoint": "orders",
        "attempt": 2,
        "status": 503,
        "duration_ms": 12.3,
        "outcome": "retry",
        "next_delay_s": 1.5,
    }
