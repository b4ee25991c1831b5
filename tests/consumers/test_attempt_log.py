"""The attempt log line: JSON fields and timestamps, as the worker writes it (pure: no broker)."""

from __future__ import annotations

import asyncio
import io
import logging
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import orjson
import pytest

from warren.consumers import attempt_log
from warren.consumers.attempt_log import BATCH_LINES, JsonFormatter, LineHandler, configure_logging, log_attempt


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


ATTEMPTS = [
    {
        "event_id": "msg_1",
        "endpoint": "orders",
        "attempt": 1,
        "status": 200,
        "error": None,
        "duration": 0.0042,
        "outcome": "delivered",
    },
    {
        "event_id": "msg_2",
        "endpoint": "orders",
        "attempt": 3,
        "status": None,
        "error": "timed out after 5s",
        "duration": 5.0,
        "outcome": "retry",
        "next_delay": 2.25,
    },
]


def warrens_alone() -> None:
    """Warren's handler alone on the root logger: pytest adds its own for the test's call, which makes every
    attempt go through ``logging`` (as any other handler does)."""
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if isinstance(h, LineHandler)]


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_line_written_directly_is_the_line_a_record_gives(fmt: str) -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure_logging(fmt)
        handler = root.handlers[0]
        assert isinstance(handler, LineHandler)
        direct, recorded = io.StringIO(), io.StringIO()
        handler.setStream(direct)
        for attempt in ATTEMPTS:
            log_attempt(**attempt)  # type: ignore[arg-type]
        handler.flush()
        handler.setStream(recorded)
        handler.addFilter(logging.Filter())  # now the lines go through logging, as records
        for attempt in ATTEMPTS:
            log_attempt(**attempt)  # type: ignore[arg-type]
        handler.flush()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)

    def timeless(text: str) -> list[str]:  # the clock moved between the two
        if fmt == "json":
            return [
                orjson.dumps({k: v for k, v in orjson.loads(x).items() if k != "ts"}).decode()
                for x in text.splitlines()
            ]
        return [x.split(" ", 1)[1] for x in text.splitlines()]

    assert len(direct.getvalue().splitlines()) == 2
    assert timeless(direct.getvalue()) == timeless(recorded.getvalue())
    if fmt == "json":  # every documented field of both
        first, second = (orjson.loads(x) for x in direct.getvalue().splitlines())
        assert set(first) == {
            "ts",
            "level",
            "logger",
            "msg",
            "event_id",
            "endpoint",
            "attempt",
            "status",
            "duration_ms",
            "outcome",
        }
        assert second["error"] == "timed out after 5s" and second["next_delay_s"] == 2.25
        assert second["level"] == "warning" and first["level"] == "info"


async def written(stream: io.StringIO, lines: int) -> None:
    """Wait until ``lines`` lines are in ``stream`` (LINE_DELAY after the first), 10 s at most."""
    deadline = time.monotonic() + 10
    while len(stream.getvalue().splitlines()) < lines and time.monotonic() < deadline:
        await asyncio.sleep(0.002)


async def test_lines_of_several_turns_of_the_loop_are_written_together_shortly(
    configured: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given Warren's handler alone, with a delay no loaded machine's turns add up to
    warrens_alone()
    monkeypatch.setattr(attempt_log, "LINE_DELAY", 0.5)
    writes: list[str] = []
    real = configured.write
    configured.write = lambda text: writes.append(text) or real(text)  # type: ignore[method-assign]
    # When three lines are logged, each in a turn of its own
    for n in range(3):
        log_attempt(**{**ATTEMPTS[0], "event_id": f"msg_{n}"})  # type: ignore[arg-type]
        await asyncio.sleep(0)
    assert configured.getvalue() == ""  # waiting for the others of the next LINE_DELAY
    # Then they are written together, in one call, in order
    await written(configured, 3)
    assert [orjson.loads(x)["event_id"] for x in configured.getvalue().splitlines()] == ["msg_0", "msg_1", "msg_2"]
    assert len(writes) == 1


async def test_another_record_is_written_after_the_lines_before_it(configured: io.StringIO) -> None:
    warrens_alone()
    log_attempt(**ATTEMPTS[0])  # type: ignore[arg-type]
    logging.getLogger("warren.worker").warning("something else")
    log_attempt(**ATTEMPTS[1])  # type: ignore[arg-type]
    await written(configured, 3)
    lines = [orjson.loads(x) for x in configured.getvalue().splitlines()]
    assert [x.get("event_id", x["msg"]) for x in lines] == ["msg_1", "something else", "msg_2"]


async def test_a_full_batch_is_written_at_once(configured: io.StringIO) -> None:
    warrens_alone()
    for n in range(BATCH_LINES):
        log_attempt(**{**ATTEMPTS[0], "event_id": f"msg_{n}"})  # type: ignore[arg-type]
    assert len(configured.getvalue().splitlines()) == BATCH_LINES  # before the turn ends


def test_levels_are_honoured_on_the_direct_path(configured: io.StringIO) -> None:
    warrens_alone()
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    for attempt in ATTEMPTS:
        log_attempt(**attempt)  # type: ignore[arg-type]  # no event loop: written at once
    assert [orjson.loads(x)["event_id"] for x in configured.getvalue().splitlines()] == ["msg_2"]
    root.setLevel(logging.INFO)
    root.handlers[0].setLevel(logging.ERROR)
    log_attempt(**ATTEMPTS[1])  # type: ignore[arg-type]
    assert len(configured.getvalue().splitlines()) == 1


def test_an_applications_handler_and_filter_see_every_attempt_as_a_record(configured: io.StringIO) -> None:
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    keep = Keep()
    logging.getLogger("warren").addHandler(keep)
    try:
        for attempt in ATTEMPTS:
            log_attempt(**attempt)  # type: ignore[arg-type]
    finally:
        logging.getLogger("warren").removeHandler(keep)
    assert [(r.levelname, r.event_id) for r in seen] == [("INFO", "msg_1"), ("WARNING", "msg_2")]  # type: ignore[attr-defined]
    assert len(configured.getvalue().splitlines()) == 2  # Warren's handler still wrote them


def test_lines_waiting_at_exit_are_written() -> None:
    """A process that ends in the middle of a turn of its loop (an exception, SystemExit) loses no line: the
    handler is flushed by logging's shutdown at exit."""
    script = textwrap.dedent(
        """
        import asyncio
        from warren.consumers.attempt_log import configure_logging, log_attempt

        async def main():
            configure_logging("json")
            for n in range(100):
                log_attempt(event_id=f"msg_{n}", endpoint="e", attempt=1, status=200, error=None, duration=0.001,
                            outcome="delivered")
            raise SystemExit(3)  # before the loop's turn ends

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3
    ids = [orjson.loads(x)["event_id"] for x in done.stderr.splitlines()]
    assert ids == [f"msg_{n}" for n in range(100)]


def test_a_loop_stopped_in_the_middle_of_its_turn_holds_no_later_loops_lines_back(configured: io.StringIO) -> None:
    warrens_alone()

    async def log_then_break_off() -> None:
        log_attempt(**ATTEMPTS[0])  # type: ignore[arg-type]
        raise KeyboardInterrupt  # out of the loop's turn at once: the write it scheduled never runs

    first = asyncio.new_event_loop()
    with pytest.raises(KeyboardInterrupt):
        first.run_until_complete(log_then_break_off())
    first.close()
    assert configured.getvalue() == ""

    async def log_in_a_new_loop() -> None:
        log_attempt(**ATTEMPTS[1])  # type: ignore[arg-type]
        await written(configured, 2)

    asyncio.run(log_in_a_new_loop())
    assert [orjson.loads(x)["event_id"] for x in configured.getvalue().splitlines()] == ["msg_1", "msg_2"]
