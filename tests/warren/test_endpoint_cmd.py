"""`warren endpoint ...` as an operator runs it: subprocesses against the real RabbitMQ, a worker running."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import warren
from tests.support.health import wait_until
from tests.support.processes import write_config
from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.consumers.worker import Worker
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)  # CLI runs and worker processes: close to 60 s in a whole suite on 2 loaded cores


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver() as r:
        yield r


@pytest.fixture
def endpoint_config(make_config: Callable[..., WarrenConfig], receiver: Receiver) -> Callable[..., Any]:
    async def build(endpoints: list[dict[str, Any]]) -> WarrenConfig:
        config = make_config([{"url": receiver.url, "events": ["#"], **e} for e in endpoints])
        await declare(config)
        return config

    return build


async def publish(config: WarrenConfig, events: list[Event]) -> None:
    connection = await connect(config.broker.url)
    try:
        report = await (await Publisher.open(connection, config.broker.prefix)).publish_many(events)
        assert not report.failed
    finally:
        await connection.close()


@pytest.mark.timeout(150)  # eleven CLI runs and a worker: 53-60 s in a whole suite on 2 loaded cores
async def test_pause_list_show_resume_disable_enable(
    endpoint_config: Callable[..., Any], receiver: Receiver, tmp_path: Path
) -> None:
    config = await endpoint_config([{"name": "acme"}, {"name": "books", "ordering": "key", "partitions": 2}])
    path = str(write_config(tmp_path, config))
    async with Worker(config) as worker:
        # Given everything active
        code, out, _ = await warren("endpoint", "list", "--json", "-c", path)
        assert code == 0
        assert [(r["endpoint"], r["state"], r["waiting"]) for r in json.loads(out)] == [
            ("acme", "active", 0),
            ("books", "active", 0),
        ]
        # When an operator pauses acme, then the running worker stops consuming it and events wait
        code, out, _ = await warren("endpoint", "pause", "acme", "--reason", "maintenance window", "-c", path)
        assert code == 0 and "acme: paused" in out
        runner = worker.runners["acme"]
        await wait_until(lambda: runner.paused_reason is not None and not runner.consuming(), 5, "acme paused")
        events = [Event(type="x.y", data={"i": i}) for i in range(3)]
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 3, 10)  # books still gets them
        code, out, _ = await warren("endpoint", "list", "-c", path)
        assert code == 0 and "paused" in out and "maintenance window" in out
        code, out, _ = await warren("endpoint", "show", "acme", "--json", "-c", path)
        shown = json.loads(out)
        assert shown["state"] == "paused" and shown["waiting"] == 3 and shown["admin"]["by"].startswith("cli@")
        assert shown["reason"] == "maintenance window" and shown["since"].endswith("Z")
        # When resumed, then the waiting events are delivered
        code, out, _ = await warren("endpoint", "resume", "acme", "-c", path)
        assert code == 0
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 3 and len(r.received) >= 6, 10)
        # When disabled, then resume is refused (enable is the deliberate word), and enable works
        code, out, _ = await warren("endpoint", "disable", "acme", "-c", path)
        assert code == 0 and "disabled" in out
        code, _, err = await warren("endpoint", "resume", "acme", "-c", path)
        assert code == 1 and "enable" in err and "Traceback" not in err
        code, out, _ = await warren("endpoint", "enable", "acme", "-c", path)
        assert code == 0 and "enabled" in out
        await wait_until(lambda: runner.paused_reason is None and bool(runner.consuming()), 5, "acme consuming")
        code, out, _ = await warren("endpoint", "enable", "acme", "-c", path)
        assert code == 0 and "already active" in out


async def test_errors_are_one_line_with_the_right_exit_code(
    endpoint_config: Callable[..., Any], tmp_path: Path
) -> None:
    config = await endpoint_config([{"name": "acme"}])
    path = str(write_config(tmp_path, config))
    code, _, err = await warren("endpoint", "show", "nope", "-c", path)
    assert code == 2 and "unknown endpoint 'nope'" in err and "acme" in err
    unreachable = config.model_copy(
        update={"broker": config.broker.model_copy(update={"url": "amqp://guest:guest@127.0.0.1:1/"})}
    )
    code, _, err = await warren("endpoint", "list", "-c", str(write_config(tmp_path, unreachable, "down.toml")))
    assert code == 1 and "cannot connect to RabbitMQ" in err and "Traceback" not in err


async def test_show_hides_credentials_in_the_url(
    make_config: Callable[..., WarrenConfig], receiver: Receiver, tmp_path: Path
) -> None:
    # Given an endpoint whose URL carries a user and password, and a token in its query
    url = receiver.url.replace("http://", "http://hook-user:pa55word@") + "/in?token=s3cret&v=2"
    config = make_config([{"name": "acme", "url": url, "events": ["#"]}])
    await declare(config)
    # When an operator shows it
    code, out, err = await warren("endpoint", "show", "acme", "-c", str(write_config(tmp_path, config)))
    # Then the URL is there with neither credential
    assert code == 0, err
    assert "***@127.0.0.1" in out and "token=***" in out
    assert "pa55word" not in out and "hook-user" not in out and "s3cret" not in out
