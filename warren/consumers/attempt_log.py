"""One structured log line per delivery attempt, as text or JSON (``worker.log_format``).

The line goes through the standard ``logging`` machinery whenever the logging configuration is anyone's but
Warren's own (another handler, a filter, a formatter of the application's, a logger that does not propagate): the
logger's level, its handlers and its filters decide, as for any other record. Under Warren's own configuration
(``configure_logging``: one ``LineHandler`` on the root logger, with Warren's formatter, and nothing else on the
way), the line is formatted directly from the attempt's fields, to the same text a record would give, without a
``LogRecord``, and waits in the handler with the other lines of the next few milliseconds (``LINE_DELAY``), written
in one call: one write for the lines of many turns of the event loop, where a write each turn cost the worker a
system call every few deliveries. A line never waits longer: it is written before any other record the handler
emits (so the order holds), on ``flush`` and ``close`` (``logging.shutdown``, at exit), and at 256 lines.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any, TextIO

import orjson

__all__ = ["JsonFormatter", "LineHandler", "TextFormatter", "configure_logging", "log_attempt"]

_ATTEMPT_LOGGER = "warren.delivery"
attempt_logger = logging.getLogger(_ATTEMPT_LOGGER)

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """A log record as one JSON object: time, level, logger, message and every ``extra`` field."""

    _second = -1
    _second_text = ""

    def _ts(self, created: float, msecs: float) -> str:
        second = int(created)
        if second != self._second:  # one strftime a second, not one a line
            self._second, self._second_text = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._second_text}.{int(msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": self._ts(record.created, record.msecs),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        data.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(data, default=str).decode()

    def line(self, created: float, level: int, logger: str, msg: str, fields: dict[str, Any]) -> str:
        """What ``format`` gives for a record of these (no exception, ``msg`` without arguments)."""
        data: dict[str, Any] = {
            "ts": self._ts(created, (created - int(created)) * 1000),  # LogRecord's msecs
            "level": _LEVEL_NAMES[level],
            "logger": logger,
            "msg": msg,
        }
        data.update(fields)
        return orjson.dumps(data, default=str).decode()

    def attempt_line(self, created: float, level: int, attempt: dict[str, Any]) -> str:
        """``line`` of an attempt whose dict holds the line's keys in order, ``ts`` and ``level`` to be set here."""
        attempt["ts"] = self._ts(created, (created - int(created)) * 1000)
        attempt["level"] = _LEVEL_NAMES[level]
        return orjson.dumps(attempt, default=str).decode()


class TextFormatter(logging.Formatter):
    """Human-readable: the message followed by its extra fields as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{k}={v}" for k, v in record.__dict__.items() if k not in _STANDARD)
        base = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {record.getMessage()}"
        text = f"{base} {extras}" if extras else base
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text

    def line(self, created: float, level: int, logger: str, msg: str, fields: dict[str, Any]) -> str:
        """What ``format`` gives for a record of these (no exception, ``msg`` without arguments)."""
        extras = " ".join(f"{k}={v}" for k, v in fields.items())
        base = f"{time.strftime('%H:%M:%S', self.converter(created))} {logging.getLevelName(level):<7} {logger}: {msg}"
        return f"{base} {extras}" if extras else base


_LEVEL_NAMES = {logging.INFO: "info", logging.WARNING: "warning"}
_HEAD = ("ts", "level", "logger", "msg")  # a JSON line's first keys, before the record's extra fields
BATCH_LINES = 256  # written at once at the latest
LINE_DELAY = 0.005  # seconds a line may wait for others to be written with


class LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Warren's handler: a ``StreamHandler`` that also takes lines formatted already (``add``), written together
    ``LINE_DELAY`` after the first of them, before any record it emits, on ``flush`` and ``close``, or at
    ``BATCH_LINES``."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self._lines: list[str] = []
        # The loop that writes them shortly: another loop's (one that stopped before it ran the write) does not
        # count, or this loop's lines would wait for the next record.
        self._scheduled: asyncio.AbstractEventLoop | None = None

    def add(self, line: str) -> None:
        with self.lock:  # type: ignore[union-attr]  # createLock() made it
            self._lines.append(line)
            if len(self._lines) >= BATCH_LINES:
                self._write_lines()
                return
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no event loop in this thread: nothing would write it later
                self._write_lines()
                return
            if self._scheduled is not loop:
                loop.call_later(LINE_DELAY, self.write_lines)
                self._scheduled = loop

    def write_lines(self) -> None:
        """Write the lines waiting, in one call."""
        with self.lock:  # type: ignore[union-attr]
            self._write_lines()

    def _write_lines(self) -> None:
        self._scheduled = None
        if not self._lines:
            return
        text = "\n".join(self._lines) + self.terminator
        self._lines.clear()
        try:
            self.stream.write(text)
            self.stream.flush()
        except Exception:  # as Handler.emit does: a broken stream is reported on stderr, never raised
            self.handleError(logging.makeLogRecord({"msg": text[:200]}))

    def emit(self, record: logging.LogRecord) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write_lines()  # the lines before this record come first
        super().emit(record)

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write_lines()
        super().flush()


def _direct(level: int) -> LineHandler | None:
    """Warren's handler when it alone would write a ``warren.delivery`` record of ``level`` with Warren's own
    formatter, nothing else on the way (no filter, no other handler, no level of the handler's above it): then a
    line formatted from the fields is exactly what the record would have become. Else None: the record goes
    through ``logging``."""
    found: LineHandler | None = None
    logger: logging.Logger | None = attempt_logger
    while logger is not None:
        if logger.filters:
            return None
        for handler in logger.handlers:
            if found is not None or type(handler) is not LineHandler:
                return None
            found = handler
        if not logger.propagate:
            break
        logger = logger.parent
    if found is None or found.filters or level < found.level or type(found.formatter) not in _OURS:
        return None
    return found


_OURS = (JsonFormatter, TextFormatter)


def configure_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    # Neither formatter writes the caller's file and line, the thread or the process, so the records need not
    # collect them: a third of the cost of each attempt's line (the logging HOWTO, "Optimization").
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = LineHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aio_pika").setLevel(logging.WARNING)
    logging.getLogger("aiormq").setLevel(logging.WARNING)


def log_attempt(
    *,
    event_id: str,
    endpoint: str,
    attempt: int,
    status: int | None,
    error: str | None,
    duration: float,
    outcome: str,
    next_delay: float | None = None,
) -> None:
    """The one line per attempt: event id, endpoint, attempt, status or error, duration, next delay; at info
    when delivered, else at warning."""
    level = logging.INFO if outcome == "delivered" else logging.WARNING
    if not attempt_logger.isEnabledFor(level):
        return
    # Laid out as JsonFormatter.line lays a record out, ``ts`` and ``level`` set there: one dict a line.
    line: dict[str, Any] = {
        "ts": None,
        "level": None,
        "logger": _ATTEMPT_LOGGER,
        "msg": "attempt",
        "event_id": event_id,
        "endpoint": endpoint,
        "attempt": attempt,
        "status": status,
        "duration_ms": round(duration * 1000, 1),
        "outcome": outcome,
    }
    if error:
        line["error"] = error
    if next_delay is not None:
        line["next_delay_s"] = round(next_delay, 3)
    handler = _direct(level)
    if handler is not None and type(handler.formatter) is JsonFormatter:
        handler.add(handler.formatter.attempt_line(time.time(), level, line))
        return
    for key in _HEAD:  # the record's own fields: the rest are its extra ones
        del line[key]
    if handler is None:
        attempt_logger.log(level, "attempt", extra=line)
        return
    formatter: TextFormatter = handler.formatter  # type: ignore[assignment]  # _direct checked
    handler.add(formatter.line(time.time(), level, _ATTEMPT_LOGGER, "attempt", line))
