"""One structured log line per delivery attempt, as text or JSON (``worker.log_format``)."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

__all__ = ["JsonFormatter", "configure_logging", "log_attempt"]

attempt_logger = logging.getLogger("warren.delivery")

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """A log record as one JSON object: time, level, logger, message and every ``extra`` field."""

    _second = -1
    _second_text = ""

    def _ts(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:  # one strftime a second, not one a line
            self._second, self._second_text = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._second_text}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": self._ts(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        data.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(data, default=str).decode()


class TextFormatter(logging.Formatter):
    """Human-readable: the message followed by its extra fields as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(f"{k}={v}" for k, v in record.__dict__.items() if k not in _STANDARD)
        base = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {record.getMessage()}"
        text = f"{base} {extras}" if extras else base
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    # Neither formatter writes the caller's file and line, the thread or the process, so the records need not
    # collect them: a third of the cost of each attempt's line (the logging HOWTO, "Optimization").
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
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
    """The one line per attempt: event id, endpoint, attempt, status or error, duration, next delay."""
    if not attempt_logger.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {
        "event_id": event_id,
        "endpoint": endpoint,
        "attempt": attempt,
        "status": status,
        "duration_ms": round(duration * 1000, 1),
        "outcome": outcome,
    }
    if error:
        fields["error"] = error
    if next_delay is not None:
        fields["next_delay_s"] = round(next_delay, 3)
    level = logging.INFO if outcome == "delivered" else logging.WARNING
    attempt_logger.log(level, "attempt", extra=fields)
