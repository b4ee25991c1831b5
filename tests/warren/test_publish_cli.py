"""`warren publish` as a user runs it: one event from flags, many from JSON lines, bad input reported."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import aio_pika
import orjson
import pytest

from tests.support.cli import clean_env, warren
from tests.support.deep_json import BEYOND_ORJSON, nested, with_duplicate
from tests.support.processes import signal_child, write_config
from tests.support.topology import declare
from warren.topology import names

pytestmark = pytest.mark.timeout(120)


async def drain(url: str, queue_name: str) -> list[aio_pika.abc.AbstractIncomingMessage]:
    connection = await aio_pika.connect(url)
    try:
        queue = await (await connection.channel()).get_queue(queue_name)
        got = []
        while (message := await queue.get(no_ack=True, fail=False)) is not None:
            got.append(message)
        return got
    finally:
        await connection.close()


@pytest.fixture
async def configured(make_config, tmp_path: Path):  # type: ignore[no-untyped-def]
    config = make_config([{"name": "sink", "url": "http://127.0.0.1:9/hook", "events": ["order.*"]}])
    await declare(config)
    return config, write_config(tmp_path, config)


async def test_one_event_from_flags(configured) -> None:  # type: ignore[no-untyped-def]
    config, path = configured
    code, out, err = await warren(
        "publish",
        "--config",
        str(path),
        "--type",
        "order.paid",
        "--data",
        '{"amount": 5}',
        "--id",
        "evt-1",
        "--key",
        "cust-9",
        "--sequence",
        "3",
    )
    assert code == 0, err
    assert "published evt-1" in out
    [message] = await drain(config.broker.url, names.work_queue(config.broker.prefix, "sink"))
    body = orjson.loads(message.body)
    assert body["id"] == "evt-1" and body["data"] == {"amount": 5} and body["key"] == "cust-9"
    assert body["sequence"] == 3 and message.headers["warren-key"] == "cust-9"


async def test_file_with_a_bad_line_reports_it_and_publishes_the_rest(configured, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Given a JSON-lines file with 3 good events, a line that is not JSON and one without a type
    config, path = configured
    lines = [
        b'{"type": "order.paid", "data": {"n": 1}}',
        b"{not json",
        b'{"type": "order.paid", "data": {"n": 2}, "key": "k"}',
        b'{"data": {"n": 3}}',
        b'{"type": "order.paid", "data": {"n": 4}, "id": "fixed-4"}',
    ]
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(lines) + b"\n")
    # When they are published
    code, out, err = await warren("publish", "--config", str(path), "--file", str(events))
    # Then the bad lines are reported by number, the others published, and the exit code says something failed
    assert code == 1
    assert "line 2:" in err and "line 4:" in err
    assert "published 3 event(s)" in out and "2 bad line(s)" in out
    messages = await drain(config.broker.url, names.work_queue(config.broker.prefix, "sink"))
    assert sorted(orjson.loads(m.body)["data"]["n"] for m in messages) == [1, 2, 4]


async def test_stdin_and_unroutable_event(configured) -> None:  # type: ignore[no-untyped-def]
    # Given events on standard input, one of a type nobody subscribes to
    _config, path = configured
    stdin = b'{"type": "order.paid", "data": 1}\n{"type": "user.created", "data": 2}\n'
    code, out, err = await warren("publish", "--config", str(path), "--file", "-", stdin=stdin)
    # Then the unroutable one is reported, not silently dropped
    assert code == 1
    assert "unroutable" in err
    assert "published 1 event(s); 1 not stored" in out


async def test_bad_flags_exit_2(configured) -> None:  # type: ignore[no-untyped-def]
    _, path = configured
    code, _, err = await warren("publish", "--config", str(path), "--type", "order.paid", "--data", "{nope")
    assert code == 2 and "--data is not JSON" in err and "Traceback" not in err
    code, _, err = await warren("publish", "--config", str(path), "--type", "bad type!", "--data", "1")
    assert code == 2 and "event type" in err


async def test_a_live_pipe_publishes_each_line_as_it_arrives(configured) -> None:  # type: ignore[no-untyped-def]
    # Given `warren publish --file -` reading a pipe that stays open, and a consumer on the endpoint's queue
    config, path = configured
    connection = await aio_pika.connect(config.broker.url)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "warren", "publish", "--file", "-", "--config", str(path),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
    )  # fmt: skip
    assert process.stdin is not None
    arrived: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
        arrived.put_nowait((time.monotonic(), message.body))

    def line(n: int) -> bytes:
        return orjson.dumps({"type": "order.paid", "data": {"n": n}, "id": f"live-{n}"}) + b"\n"

    try:
        queue = await (await connection.channel()).get_queue(names.work_queue(config.broker.prefix, "sink"))
        await queue.consume(on_message, no_ack=True)
        # When a first line arrives (once it is delivered, the command is connected and reading)
        process.stdin.write(line(1))
        await process.stdin.drain()
        _, first = await asyncio.wait_for(arrived.get(), 15)
        # And then one more line is written, and the pipe left open
        written = time.monotonic()
        process.stdin.write(line(2))
        await process.stdin.drain()
        # Then that event is delivered within 2.5 s (milliseconds on a quiet machine; a child process of a loaded
        # one, two suites on two cores, can wait a second for a core), while the command still waits for more: a
        # reader that holds lines until EOF or a full batch never delivers it (the 5 s wait fails)
        at, second = await asyncio.wait_for(arrived.get(), 5)
        assert at - written < 2.5, at - written
        assert [orjson.loads(b)["id"] for b in (first, second)] == ["live-1", "live-2"]
        assert process.returncode is None
        # And the end of the pipe finishes the command, both events counted
        process.stdin.close()
        out, err = await asyncio.wait_for(process.communicate(), 20)
        assert process.returncode == 0, err
        assert "published 2 event(s)" in out.decode()
    finally:
        signal_child(process)
        await process.wait()
        await connection.close()


async def test_data_with_a_duplicate_key_is_refused(configured) -> None:  # type: ignore[no-untyped-def]
    # Given --data whose object repeats a key (a proxy may read the first copy, orjson keeps the last)
    config, path = configured
    code, _, err = await warren(
        "publish", "--config", str(path), "--type", "order.paid", "--data", '{"amount": 5, "amount": 500}'
    )
    # Then it is a usage error naming the key, and nothing is published
    assert code == 2 and "duplicate key 'amount'" in err
    assert await drain(config.broker.url, names.work_queue(config.broker.prefix, "sink")) == []


async def test_an_id_with_a_trailing_newline_is_refused(configured) -> None:  # type: ignore[no-untyped-def]
    # Given `warren publish --id $'x\n'` (a trailing newline passed an id pattern applied with re.match)
    config, path = configured
    code, out, err = await warren(
        "publish", "--config", str(path), "--type", "order.paid", "--data", "{}", "--id", "x\n"
    )
    # Then it is refused with a clear error, and nothing is published
    assert code != 0
    assert "event id 'x\\n' must be 1-200 letters" in out + err
    assert await drain(config.broker.url, names.work_queue(config.broker.prefix, "sink")) == []


async def test_deeply_nested_lines_and_data_are_clear_errors(configured, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Given JSON lines nested deeper than a parser reads or writes, between two good events: 200,000 levels
    # (beyond orjson), 1,000 levels with "type" twice (orjson reads it, the standard library raised RecursionError)
    # and 300 levels (orjson reads it but writes at most 254: the duplicate check raised TypeError)
    config, path = configured
    lines = [
        b'{"type": "order.paid", "data": {"n": 1}}',
        BEYOND_ORJSON,
        with_duplicate(b'{"type": "order.paid", "data": ' + nested(1000) + b"}", "type"),
        b'{"type": "order.paid", "data": ' + nested(300) + b"}",
        b'{"type": "order.paid", "data": {"n": 2}}',
    ]
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(lines) + b"\n")
    # When they are published
    code, out, err = await warren("publish", "--config", str(path), "--file", str(events))
    # Then each deep line is reported by number and why, and the good ones are published
    assert code == 1 and "Traceback" not in err, err
    assert "line 2: not JSON" in err
    assert "line 3: duplicate key 'type'" in err
    assert "line 4: nested too deeply to publish (at most 254 levels)" in err
    assert "published 2 event(s); 0 not stored; 3 bad line(s) (lines 2, 3, 4)" in out
    messages = await drain(config.broker.url, names.work_queue(config.broker.prefix, "sink"))
    assert sorted(orjson.loads(m.body)["data"]["n"] for m in messages) == [1, 2]
    # And --data as deep is a usage error too (50,000 levels: one argument holds at most 128 KiB)
    for data, says in (
        (nested(50_000), "--data is not JSON"),
        (b'{"a": ' + nested(1000) + b', "a": 2}', "--data: duplicate key 'a'"),
    ):
        code, _, err = await warren("publish", "--config", str(path), "--type", "order.paid", "--data", data.decode())
        assert code == 2 and says in err and "Traceback" not in err, err
    assert await drain(config.broker.url, names.work_queue(config.broker.prefix, "sink")) == []


async def test_an_event_over_max_payload_is_reported_and_the_rest_published(make_config, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Given a file whose second event is over delivery.max_payload, between two that fit
    config = make_config(
        [{"name": "sink", "url": "http://127.0.0.1:9/hook", "events": ["order.*"]}], delivery={"max_payload": 2048}
    )
    await declare(config)
    path = write_config(tmp_path, config)
    lines = [
        b'{"type": "order.paid", "data": {"n": 1}, "key": "k"}',
        b'{"type": "order.paid", "data": {"n": 2, "pad": "' + b"x" * 4000 + b'"}, "key": "k"}',
        b'{"type": "order.paid", "data": {"n": 3}, "key": "k"}',
    ]
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(lines) + b"\n")
    # When they are published
    code, out, err = await warren("publish", "--config", str(path), "--file", str(events))
    # Then the big one is reported as not stored, saying why, and the others are published (it holds no place
    # in its key's order, as it is never sent)
    assert code == 1
    assert "over the limit of 2048" in err
    assert "published 2 event(s); 1 not stored" in out
    messages = await drain(config.broker.url, names.work_queue(config.broker.prefix, "sink"))
    assert [orjson.loads(m.body)["data"]["n"] for m in messages] == [1, 3]
