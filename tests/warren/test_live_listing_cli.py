"""``warren status``, ``warren endpoint list`` and ``warren topology show --live`` show the live endpoints (created
through the admin API, known to RabbitMQ by the endpoints stream) beside the file's, each marked by who manages it.
No store is configured here: these commands read the live endpoints from RabbitMQ, as workers do."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from aio_pika import Message

from tests.conftest import TEST_SECRET
from tests.support.cli import warren
from tests.support.processes import write_config
from tests.support.topology import declare
from warren.broker.amqp.connection import connect
from warren.broker.live_apply import apply_endpoint
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

pytestmark = pytest.mark.timeout(120)  # four `warren` runs each; seconds apiece on a loaded machine


@pytest.fixture
async def file_and_live(make_config: Callable[..., WarrenConfig], tmp_path: Path) -> tuple[WarrenConfig, Path]:
    """One endpoint in the file and one applied live (as the admin API does), declared; the file's path."""
    config = make_config([{"name": "from-file", "url": "http://127.0.0.1:9/f", "events": ["order.*"]}])
    await declare(config)
    live = Endpoint.model_validate(
        {"name": "from-api", "url": "http://127.0.0.1:9/a", "events": ["#"], "tenant": "acme", "secret": TEST_SECRET}
    )
    await apply_endpoint(config, live)
    return config, write_config(tmp_path, config)


async def test_status_shows_the_live_endpoints_marked(file_and_live: tuple[WarrenConfig, Path]) -> None:
    _, path = file_and_live
    # When `warren status` runs, as JSON and as text
    as_json = await warren("status", "--config", str(path), "--json")
    text = await warren("status", "--config", str(path))
    only_live = await warren("status", "--config", str(path), "--json", "--endpoints", "from-api")
    unknown = await warren("status", "--config", str(path), "--endpoints", "nope")
    # Then both endpoints are there, each marked by who manages it, with the live one's queues counted
    assert as_json.code == 0, as_json.err
    endpoints = {e["name"]: e for e in json.loads(as_json.out)["endpoints"]}
    assert {n: e["managed_by"] for n, e in endpoints.items()} == {"from-file": "file", "from-api": "api"}
    assert endpoints["from-api"]["queues"][0]["exists"] is True
    assert text.code == 0 and "from-api · live (api-managed)" in text.out and "from-file · unordered" in text.out
    # And --endpoints knows the live one; an unknown name is still a usage error
    assert [e["name"] for e in json.loads(only_live.out)["endpoints"]] == ["from-api"]
    assert unknown.code == 2 and "unknown endpoint(s): nope" in unknown.err


async def test_endpoint_list_shows_the_live_endpoints_marked(file_and_live: tuple[WarrenConfig, Path]) -> None:
    _, path = file_and_live
    as_json = await warren("endpoint", "list", "--config", str(path), "--json")
    table = await warren("endpoint", "list", "--config", str(path))
    assert as_json.code == 0, as_json.err
    rows = {r["endpoint"]: r for r in json.loads(as_json.out)}
    assert {n: (r["managed_by"], r["state"]) for n, r in rows.items()} == {
        "from-file": ("file", "active"),
        "from-api": ("api", "active"),
    }
    assert table.code == 0 and "managed by" in table.out
    [row] = [line for line in table.out.splitlines() if line.startswith("from-api")]
    assert row.replace("│", " ").split()[:2] == ["from-api", "api"], table.out


async def test_topology_show_live_plans_and_marks_the_live_endpoints(file_and_live: tuple[WarrenConfig, Path]) -> None:
    config, path = file_and_live
    prefix = config.broker.prefix
    plain = await warren("topology", "show", "--config", str(path))
    live = await warren("topology", "show", "--config", str(path), "--live")
    # Then the file alone by default (no broker needed), and with --live the live endpoint's objects, marked
    assert plain.code == 0 and f"{prefix}.ep.from-api" not in plain.out
    assert live.code == 0, live.err
    assert "1 live endpoint(s)" in live.out.splitlines()[0]
    [line] = [x for x in live.out.splitlines() if f"{prefix}.ep.from-api (" in x]
    assert line.rstrip().endswith("live (api-managed)")
    assert f"{prefix}.ep.from-api.q — work" in live.out
    [file_line] = [x for x in live.out.splitlines() if f"{prefix}.ep.from-file (" in x]
    assert "live" not in file_line


async def test_topology_show_live_without_a_broker_warns_and_shows_the_file(
    make_config: Callable[..., WarrenConfig], tmp_path: Path
) -> None:
    config = make_config(
        [{"name": "from-file", "url": "http://127.0.0.1:9/f", "events": ["#"]}],
        broker={"url": "amqp://guest:guest@127.0.0.1:9/"},
    )
    result = await warren("topology", "show", "--config", str(write_config(tmp_path, config)), "--live")
    assert result.code == 0, result.err
    assert "live endpoints not shown" in result.err and f"{config.broker.prefix}.ep.from-file" in result.out


async def test_every_dlq_command_and_endpoint_show_serve_a_live_endpoint(
    file_and_live: tuple[WarrenConfig, Path],
) -> None:
    config, path = file_and_live
    c = ("--config", str(path))
    # Given a dead letter in the live endpoint's DLQ (a worker put it there)
    connection = await connect(config.broker.urls)
    try:
        channel = await connection.channel()
        message = Message(
            orjson.dumps({"id": "msg_dead1", "type": "order.paid", "timestamp": "2026-12-05T00:00:00Z", "data": {}}),
            message_id="msg_dead1",
            headers={"warren-dead-reason": "HTTP 400", "warren-dead-ms": 1_796_000_000_000},
        )
        await channel.default_exchange.publish(message, routing_key=names.dlq(config.broker.prefix, "from-api"))
    finally:
        await connection.close()
    # When `warren dlq` lists, shows, replays (dry run) and purges it, and `warren endpoint show` reads it
    listed = await warren("dlq", "list", "from-api", *c, "--json")
    shown = await warren("dlq", "show", "from-api", "msg_dead1", *c, "--json")
    dry = await warren("dlq", "replay", "from-api", *c, "--dry-run")
    purged = await warren("dlq", "purge", "from-api", *c, "--yes")
    endpoint = await warren("endpoint", "show", "from-api", *c, "--json")
    unknown = await warren("dlq", "list", "nope", *c)
    # Then each serves it as it serves a file endpoint (it used to be refused as unknown)
    assert listed.code == 0, listed.err
    assert [letter["event_id"] for letter in json.loads(listed.out)] == ["msg_dead1"]
    assert shown.code == 0 and json.loads(shown.out)["event_id"] == "msg_dead1", shown.err
    assert dry.code == 0 and "1 dead letter(s) would be moved" in dry.out, dry.err
    assert purged.code == 0 and "purged 1 dead letter(s)" in purged.out, purged.err
    assert endpoint.code == 0 and json.loads(endpoint.out)["endpoint"] == "from-api", endpoint.err
    # And an unknown name is a usage error naming what exists, of the file and live
    assert unknown.code == 2 and "unknown endpoint 'nope'" in unknown.err
    assert "from-file" in unknown.err and "from-api" in unknown.err
