"""``warren dlq`` and ``warren status`` as an operator runs them: subprocesses against the real RabbitMQ."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aio_pika
import pytest

from tests.support.cli import spawn_warren
from tests.support.dead_letters import drain, peek_ids, seed_dead_letters, wait_depth, wait_depth_at_least
from tests.support.processes import write_config
from tests.support.topology import declare
from warren.broker.dlq.move import DEFAULT_WINDOW, REPLAY_ACK_BATCH
from warren.broker.events import Event
from warren.topology import names
from warren.topology.config import WarrenConfig

# Several CLI runs per test: 40 s and more in a whole suite on 2 loaded cores, 97 s with two suites at once (and
# 120 s, setup and teardown included, once).
pytestmark = pytest.mark.timeout(240)


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def _env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("WARREN_")}
    return {**clean, "COLUMNS": "220"}


async def warren(config_path: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Run:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "warren", *args, "--config", str(config_path),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env or _env(),
    )  # fmt: skip
    try:
        # A hang guard, not a time limit: a client-side replay of 4,000 letters takes 9 s alone and took over 40 s
        # with two whole suites at once on RabbitMQ 4.0.5
        out, err = await asyncio.wait_for(process.communicate(stdin or b""), 100)
    except TimeoutError:
        process.kill()
        _, err = await process.communicate()
        said = err.decode()[-2000:]
        raise AssertionError(f"warren {' '.join(args)} still running after 100 s; stderr: {said}") from None
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


@pytest.fixture
async def down(make_config: Any, tmp_path: Path) -> tuple[WarrenConfig, Path]:
    """An endpoint 'down' declared on the broker (nothing listens at its URL), and its config file."""
    config: WarrenConfig = make_config(
        [{"name": "down", "url": "http://127.0.0.1:9/hook", "events": ["#"], "circuit": {"enabled": False}}]
    )
    await declare(config)
    return config, write_config(tmp_path, config)


async def test_list_and_show_tell_each_story(down: tuple[WarrenConfig, Path]) -> None:
    # Given 12 dead letters, 8 of type a.x then 4 of type b.y, dead ten minutes apart in that order (the time
    # filters below fall between two of them with five minutes to spare: on a loaded machine the commands
    # before them took over 30 s, which one minute apart did not survive)
    config, path = down
    base = int(time.time() * 1000) - 12 * 600_000
    events = [Event(type="a.x" if i < 8 else "b.y", data={"i": i}, key=f"k{i}") for i in range(12)]
    await seed_dead_letters(config, "down", events, dead_ms=[base + i * 600_000 for i in range(12)])
    dlq = names.dlq(config.broker.prefix, "down")
    order = await peek_ids(config, dlq)
    # When they are listed every way, and one is shown whole
    everything = await warren(path, "dlq", "list", "down")
    only_b = await warren(path, "dlq", "list", "down", "--json", "--type", "b.*")
    newest = await warren(path, "dlq", "list", "down", "--json", "--newest", "--limit", "3")
    recent = await warren(path, "dlq", "list", "down", "--json", "--since", "45m")
    early = await warren(path, "dlq", "list", "down", "--json", "--until", "1h55m")
    shown = await warren(path, "dlq", "show", "down", events[9].id, "--json")
    shown_text = await warren(path, "dlq", "show", "down", events[9].id)
    missing = await warren(path, "dlq", "show", "down", "no-such-id")
    unknown = await warren(path, "dlq", "list", "nope")
    bad_time = await warren(path, "dlq", "list", "down", "--since", "yesterday-ish")
    # Then the table has every message and the filters pick what they say
    assert everything.code == 0, everything.err
    assert all(e.id in everything.out for e in events) and "12 shown of 12" in everything.out
    assert "HTTP 500" in everything.out
    assert [row["event_id"] for row in json.loads(only_b.out)] == [e.id for e in events[8:]]
    assert [row["event_id"] for row in json.loads(newest.out)] == [e.id for e in events[:-4:-1]]
    assert [row["event_id"] for row in json.loads(recent.out)] == [e.id for e in events[8:]]
    assert [row["event_id"] for row in json.loads(early.out)] == [events[0].id]
    row = json.loads(only_b.out)[0]
    assert row["attempts"] == 2 and row["last_status"] == 500 and row["key"] == "k8"
    assert row["dead_at"].endswith("Z") and row["first_attempt"].endswith("Z")
    # And show prints one message whole: headers, envelope, history
    detail = json.loads(shown.out)
    assert detail["event_id"] == events[9].id and detail["envelope"]["data"] == {"i": 9}
    assert detail["headers"]["warren-endpoint"] == "down" and detail["history"][0]["status"] == 500
    assert "attempt history" in shown_text.out and "envelope" in shown_text.out and events[9].id in shown_text.out
    assert missing.code == 1 and "no dead letter no-such-id" in missing.err
    assert unknown.code == 2 and "unknown endpoint 'nope'" in unknown.err
    assert bad_time.code == 2 and "neither an ISO 8601 time" in bad_time.err
    assert "Traceback" not in everything.err + missing.err + unknown.err + bad_time.err
    # And nothing moved: the same messages, in the same order
    assert await peek_ids(config, dlq) == order


async def test_dry_runs_move_nothing_and_purge_asks_first(down: tuple[WarrenConfig, Path]) -> None:
    config, path = down
    events = [Event(type="a.x" if i % 3 else "b.y", data={}) for i in range(9)]
    await seed_dead_letters(config, "down", events)
    dlq = names.dlq(config.broker.prefix, "down")
    whole = await warren(path, "dlq", "replay", "down", "--dry-run")
    subset = await warren(path, "dlq", "replay", "down", "--dry-run", "--type", "b.y")
    declined = await warren(path, "dlq", "purge", "down", stdin=b"n\n")
    assert whole.code == 0 and "dry run: 9 dead letter(s) would be moved" in whole.out
    assert "a.x 6, b.y 3" in whole.out
    assert subset.code == 0 and "dry run: 3 of 9 dead letter(s) would be replayed client-side" in subset.out
    assert declined.code == 1 and "nothing deleted" in declined.err
    assert await wait_depth(config, dlq, 9) == 9
    purged = await warren(path, "dlq", "purge", "down", "--yes")
    again = await warren(path, "dlq", "purge", "down")
    assert purged.code == 0 and "purged 9 dead letter(s)" in purged.out
    assert again.code == 0 and "nothing to purge" in again.out


async def test_replay_commands_move_to_the_endpoint(down: tuple[WarrenConfig, Path], management: Any) -> None:
    # Given 30 dead letters: 10 refunds among 20 payments
    config, path = down
    prefix = config.broker.prefix
    events = [Event(type="order.refunded" if i % 3 == 0 else "order.paid", data={"i": i}) for i in range(30)]
    await seed_dead_letters(config, "down", events)
    refunds = [e.id for e in events if e.type == "order.refunded"]
    # When the refunds are replayed client-side, then the rest through the shovel
    subset = await warren(path, "dlq", "replay", "down", "--type", "order.refunded")
    moved_first = [m.message_id for m in await drain(config, names.work_queue(prefix, "down"))]
    rest = await warren(path, "dlq", "replay", "down")
    moved_then = [m.message_id for m in await drain(config, names.work_queue(prefix, "down"))]
    empty = await warren(path, "dlq", "replay", "down")
    # Then each command moved what it said, and reported it
    assert subset.code == 0, subset.err
    assert "replayed 10 dead letter(s) of down" in subset.out and "20 left in" in subset.out
    assert sorted(moved_first) == sorted(refunds)
    assert rest.code == 0, rest.err
    assert "replayed 20 dead letter(s) of down" in rest.out and f"shovel {prefix}.replay.down." in rest.out
    assert sorted(moved_then) == sorted(e.id for e in events if e.id not in refunds)
    assert empty.code == 0 and "nothing to replay" in empty.out
    shovels = await management.request("GET", f"parameters/shovel/{management.vhost}", allow_404=True) or []
    assert [s["name"] for s in shovels if s["name"].startswith(f"{prefix}.replay.down")] == []


@pytest.mark.timeout(300)  # 9 s alone, 104 s with two suites at once, where the replay took 30 s to move 71
async def test_a_killed_replay_run_again_loses_nothing(down: tuple[WarrenConfig, Path]) -> None:
    # Given 4,000 dead letters
    config, path = down
    prefix = config.broker.prefix
    events = [Event(type="order.paid", data={"i": i}) for i in range(4000)]
    await seed_dead_letters(config, "down", events)
    # When a client-side replay is killed with SIGKILL once some hundreds are back in the work queue
    process = await spawn_warren(
        "dlq", "replay", "down", "--type", "#", "--config", str(path), output=asyncio.subprocess.DEVNULL
    )
    moved_when_killed = await wait_depth_at_least(config, names.work_queue(prefix, "down"), 300)
    process.send_signal(signal.SIGKILL)
    await process.wait()
    # And the replay is run again once RabbitMQ took the killed run's messages back
    await wait_until_no_consumer(config, names.dlq(prefix, "down"))
    again = await warren(path, "dlq", "replay", "down", "--type", "#")
    copies = Counter(m.message_id for m in await drain(config, names.work_queue(prefix, "down")))
    # Then it was killed half-way, and every event is back, duplicated at most once per publish in flight (64) or
    # confirmed copy whose DLQ ack had not gone yet (one batch waiting, one being sent)
    assert process.returncode == -signal.SIGKILL and 300 <= moved_when_killed < 4000
    assert again.code == 0, again.err
    assert set(copies) == {e.id for e in events}
    assert sum(copies.values()) - len(copies) <= DEFAULT_WINDOW + 2 * REPLAY_ACK_BATCH, copies.most_common(3)
    assert await wait_depth(config, names.dlq(prefix, "down"), 0) == 0


async def wait_until_no_consumer(config: WarrenConfig, queue: str, timeout: float = 10) -> None:
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            declared = await channel.declare_queue(queue, passive=True)
            if not declared.declaration_result.consumer_count:
                return
            await asyncio.sleep(0.05)
    finally:
        await connection.close()


async def test_a_dlq_with_a_delivery_limit_is_not_read(down: tuple[WarrenConfig, Path], management: Any) -> None:
    # Given a policy that gives the DLQ a delivery limit (each listing would count against it)
    config, path = down
    await seed_dead_letters(config, "down", [Event(type="a.b", data={})])
    dlq = names.dlq(config.broker.prefix, "down")
    vhost = quote(management.vhost, safe="")
    policy = f"policies/{vhost}/{config.broker.prefix}-dlq-limit"
    pattern = "^" + dlq.replace(".", "\\.") + "$"
    await management.request(
        "PUT", policy, {"pattern": pattern, "definition": {"delivery-limit": 5}, "apply-to": "queues"}
    )
    try:
        # When the DLQ is listed
        refused = await warren(path, "dlq", "list", "down")
    finally:
        await management.request("DELETE", policy, allow_404=True)
    # Then the command refuses, says why, and the message was never delivered
    assert refused.code == 1 and "delivery limit of 5" in refused.err
    assert await wait_depth(config, dlq, 1) == 1
    # And the command it suggests names this configuration (it runs as printed: tests/warren/test_cli_hints.py)
    assert f"`warren setup --config {path}`" in " ".join(refused.err.split())


async def test_an_80_column_terminal_keeps_each_id_whole_and_the_last_error(down: tuple[WarrenConfig, Path]) -> None:
    # Given dead letters with long ids and a last error, and a terminal 80 columns wide
    config, path = down
    events = [Event(type="order.refunded", data={"i": i}, key=f"cust-{i}") for i in range(3)]
    await seed_dead_letters(config, "down", events)
    env = {**_env(), "COLUMNS": "80"}
    # When they are listed, and a replay is dry-run
    runs = [
        await warren(path, *args, env=env)
        for args in (("dlq", "list", "down"), ("dlq", "replay", "down", "--dry-run", "--type", "#"))
    ]
    # Then every id is on the screen whole, no line is wider than the terminal, and the list shows the last error
    for run in runs:
        assert run.code == 0, run.err
        assert all(event.id in run.out for event in events), run.out
        assert max(len(line) for line in run.out.splitlines()) <= 80, run.out
    assert runs[0].out.count("HTTP 500") >= 3 and "cust-2" in runs[0].out, runs[0].out


async def test_scan_reads_only_the_head_and_says_so_up_to_its_cap(down: tuple[WarrenConfig, Path]) -> None:
    # Given 12 dead letters
    config, path = down
    await seed_dead_letters(config, "down", [Event(type="a.x", data={"i": i}) for i in range(12)])
    dlq = names.dlq(config.broker.prefix, "down")
    order = await peek_ids(config, dlq)
    # When they are listed reading only the first 5, as JSON and as a table, and with a scan over the cap
    rows = await warren(path, "dlq", "list", "down", "--scan", "5", "--json")
    table = await warren(path, "dlq", "list", "down", "--scan", "5")
    over_cap = await warren(path, "dlq", "list", "down", "--scan", "65536")
    # Then exactly the 5 at the head are listed, the table says the rest were not read, and the cap is refused
    assert [row["event_id"] for row in json.loads(rows.out)] == order[:5]
    assert table.code == 0, table.err
    assert "5 shown of 12 dead letter(s) (only the first 5 of 12 were read: add --scan 12)" in table.out
    assert over_cap.code == 2 and "65535" in over_cap.err
    # And none was removed or moved
    assert await peek_ids(config, dlq) == order


async def test_a_partial_scan_keeps_the_dlq_order(down: tuple[WarrenConfig, Path]) -> None:
    # Given 12 dead letters read once whole (a quorum queue now serves all 12 as given back), then 3 new ones
    config, path = down
    events = [Event(type="a.x", data={"i": i}) for i in range(15)]
    await seed_dead_letters(config, "down", events[:12])
    dlq = names.dlq(config.broker.prefix, "down")
    assert await peek_ids(config, dlq) == [e.id for e in events[:12]]
    await seed_dead_letters(config, "down", events[12:])
    # When the head is read by partial scans (list, show), and one letter of the head is replayed by one
    listed = await warren(path, "dlq", "list", "down", "--scan", "5", "--json")
    shown = await warren(path, "dlq", "show", "down", events[2].id, "--scan", "3", "--json")
    replayed = await warren(path, "dlq", "replay", "down", "--ids", events[1].id, "--scan", "2")
    # Then each read only the head
    assert [row["event_id"] for row in json.loads(listed.out)] == [e.id for e in events[:5]], listed.err
    assert shown.code == 0 and events[2].id in shown.out, shown.err
    assert replayed.code == 0 and "replayed 1 dead letter(s)" in replayed.out, replayed.err
    assert "only the first 2 of 15 were read" in replayed.out
    # And the DLQ keeps its order, less the replayed letter (the head used to move to the tail)
    assert await peek_ids(config, dlq) == [e.id for e in events if e is not events[1]]


async def test_replay_by_ids_moves_exactly_those(down: tuple[WarrenConfig, Path]) -> None:
    # Given 6 dead letters
    config, path = down
    prefix = config.broker.prefix
    events = [Event(type="a.x", data={"i": i}) for i in range(6)]
    await seed_dead_letters(config, "down", events)
    chosen = [events[1].id, events[4].id]
    # When two of them are replayed by id (with a stray comma and space)
    replayed = await warren(path, "dlq", "replay", "down", "--ids", f"{chosen[0]}, {chosen[1]},")
    moved = [m.message_id for m in await drain(config, names.work_queue(prefix, "down"))]
    nothing = await warren(path, "dlq", "replay", "down", "--ids", " , ")
    bad_timeout = await warren(path, "dlq", "replay", "down", "--timeout", "soon")
    # Then exactly those two went back to the endpoint, and the other four stay in order
    assert replayed.code == 0, replayed.err
    assert "replayed 2 dead letter(s) of down" in replayed.out and "4 left in" in replayed.out
    assert sorted(moved) == sorted(chosen)
    assert await peek_ids(config, names.dlq(prefix, "down")) == [e.id for e in events if e.id not in chosen]
    # And an empty --ids or a --timeout that is no duration is a usage error that moves nothing
    assert nothing.code == 2 and "--ids needs at least one event id" in nothing.err
    assert bad_timeout.code == 2 and "--timeout" in bad_timeout.err
    assert await wait_depth(config, names.dlq(prefix, "down"), 4) == 4


async def test_list_and_show_print_control_characters_from_a_message_as_escapes(
    down: tuple[WarrenConfig, Path],
) -> None:
    # Given a raw dead letter whose id holds a BEL and a screen-clearing escape, and whose type holds a newline
    config, path = down
    raw_id, raw_type = "bad\x07id\x1b[2J", "a.x\nfake row"
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(names.dead_exchange(config.broker.prefix))
        message = aio_pika.Message(b"not json", message_id=raw_id, type=raw_type, headers={"warren-key": "k\x1b]0;t"})
        await exchange.publish(message, routing_key="down")
    finally:
        await connection.close()
    # When it is listed on a wide and a narrow terminal, and shown
    wide = await warren(path, "dlq", "list", "down")
    narrow = await warren(path, "dlq", "list", "down", env={**_env(), "COLUMNS": "80"})
    shown = await warren(path, "dlq", "show", "down", raw_id)
    # Then each prints the characters as escapes, and none reaches the terminal raw
    for run in (wide, narrow, shown):
        assert run.code == 0, run.err
        assert "bad\\x07id\\x1b[2J" in run.out and "a.x\\nfake row" in run.out, run.out
        assert "\x07" not in run.out and "\x1b" not in run.out and "fake row\n" not in run.out
    assert "k\\x1b]0;t" in wide.out and "k\\x1b]0;t" in shown.out


async def test_times_no_date_holds_are_one_clear_line_or_unknown(down: tuple[WarrenConfig, Path]) -> None:
    # Given two dead letters, one whose dead time header holds 10^15 ms (year 33658: a raw AMQP client can write
    # any number there), and an operator asking for letters since a moment before year 1
    config, path = down
    ok, odd = Event(type="a.x", data=1, id="ok-1"), Event(type="a.x", data=2, id="odd-1")
    await seed_dead_letters(config, "down", [ok, odd], dead_ms=[int(time.time() * 1000), 10**15])
    # When the letters are listed and shown, Then both are there, the odd time unknown (it raised ValueError)
    listed = await warren(path, "dlq", "list", "down")
    assert listed.code == 0 and "ok-1" in listed.out and "odd-1" in listed.out, listed.err
    as_json = await warren(path, "dlq", "list", "down", "--json")
    rows = {row["event_id"]: row for row in json.loads(as_json.out)}
    assert rows["odd-1"]["dead_ms"] == 10**15 and rows["odd-1"]["dead_at"] is None
    shown = await warren(path, "dlq", "show", "down", "odd-1")
    assert shown.code == 0, shown.err
    # And a --since too long ago to be a date is a usage error, not a traceback (OverflowError before)
    for since in ("9" * 400 + "s", "999999999d"):
        refused = await warren(path, "dlq", "list", "down", "--since", since)
        assert refused.code == 2 and "Traceback" not in refused.err, refused.err
    assert await wait_depth(config, names.dlq(config.broker.prefix, "down"), 2) == 2


async def test_a_letter_deeper_than_json_is_written_is_shown(down: tuple[WarrenConfig, Path]) -> None:
    # Given a dead letter as the worker makes of a body 1,000 levels deep with a repeated key (orjson reads it,
    # json.dumps raised RecursionError in `dlq show`), with a byte-array header (json.dumps raised TypeError)
    config, path = down
    body = b'{"id": "deep-1", "type": "a.x", "timestamp": "t", "data": ' + b"[" * 1000 + b"]" * 1000 + b', "id": "x"}'
    headers = {"warren-dead-reason": "malformed message: body has a duplicate key 'id'", "x-bytes": bytearray(b"\xff")}
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(names.dead_exchange(config.broker.prefix))
        await exchange.publish(aio_pika.Message(body, message_id="deep-1", headers=headers), routing_key="down")
    finally:
        await connection.close()
    # When it is shown, as text and as JSON, Then both print it, the body as text
    shown = await warren(path, "dlq", "show", "down", "deep-1")
    assert shown.code == 0 and "duplicate key 'id'" in shown.out, shown.err
    as_json = await warren(path, "dlq", "show", "down", "deep-1", "--json")
    assert as_json.code == 0, as_json.err
    assert json.loads(as_json.out)["envelope"] == {"raw": body.decode()}
