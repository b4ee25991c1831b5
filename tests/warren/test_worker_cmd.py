"""``warren worker`` as an operator runs it: --endpoints serves a subset, the default log format is text."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.consumers.conftest import endpoint_config, publish, receiver
from tests.support.cli import warren
from tests.support.health import message_count
from tests.support.processes import WorkerProcess, write_config
from tests.support.receiver import Receiver
from warren.broker.events import Event
from warren.topology import names

__all__ = ["endpoint_config", "publish", "receiver"]

pytestmark = pytest.mark.timeout(120)

# The text format: time, level, logger, message, then the record's fields as key=value.
TEXT_LINE = re.compile(r"^\d\d:\d\d:\d\d (INFO|WARNING|ERROR|DEBUG)\s+[\w.]+: ")


async def test_endpoints_option_serves_only_those_and_logs_in_text_by_default(
    endpoint_config: Callable[..., Any], receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given three endpoints, each with one event waiting, and a worker told to serve two of them (no log format
    # given: the configuration's default, text)
    config = await endpoint_config(
        [{"name": name, "events": [f"{name}.*"]} for name in ("alpha", "beta", "gamma")],
    )
    events = {name: Event(type=f"{name}.x", data={}) for name in ("alpha", "beta", "gamma")}
    await publish(config, list(events.values()))
    worker = await WorkerProcess(write_config(tmp_path, config), "--endpoints", "alpha, beta", log_format=None).start()
    try:
        await worker.wait_ready()
        # When it delivers
        await receiver.wait_for(lambda r: {events["alpha"].id, events["beta"].id} <= r.ok_ids(), 15)
        # Then gamma's event is still in its queue, which the worker never consumed
        gamma = names.work_queue(config.broker.prefix, "gamma")
        assert await message_count(config, gamma) == 1
        assert events["gamma"].id not in receiver.ok_ids()
        assert await worker.terminate() == 0
    finally:
        await worker.cleanup()
    # And its log is text: one line per record, the fields as key=value (the attempt line among them)
    lines = [line for line in worker.log_text().splitlines() if line.strip()]
    assert lines and all(TEXT_LINE.match(line) for line in lines), lines
    consuming = next(line for line in lines if "worker consuming" in line)
    assert "endpoints=['alpha', 'beta']" in consuming
    attempt = next(line for line in lines if f"event_id={events['alpha'].id}" in line)
    assert " INFO    warren.delivery: " in attempt and "endpoint=alpha" in attempt and "status=200" in attempt
    assert "outcome=delivered" in attempt
    assert not any(line.lstrip().startswith("{") for line in lines)


async def test_an_unknown_endpoint_is_a_usage_error(endpoint_config: Callable[..., Any], tmp_path: Path) -> None:
    config = await endpoint_config([{"name": "alpha"}])
    run = await warren("worker", "--config", str(write_config(tmp_path, config)), "--endpoints", "alpha,nope")
    assert run.code == 2 and "unknown endpoint(s): nope" in run.err and "Traceback" not in run.err
