"""``warren status`` as an operator runs it: the text view, --endpoints, and --watch at its --interval."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.cli import clean_env, warren
from tests.support.dead_letters import seed_dead_letters, wait_depth
from tests.support.processes import signal_child, write_config
from tests.support.tcp_proxy import TcpProxy, through
from tests.support.topology import declare
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.loop import INTERRUPT_GRACE
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def shop_and_books(make_config: Any, tmp_path: Path) -> tuple[WarrenConfig, Path]:
    """Two declared endpoints (nothing listens at their URLs; no worker runs), and the config file."""
    config: WarrenConfig = make_config(
        [
            {"name": "shop", "url": "http://127.0.0.1:9/shop", "events": ["order.*"]},
            {"name": "books", "url": "http://127.0.0.1:9/books", "events": ["book.*"], "ordering": "key",
             "partitions": 2},
        ]
    )  # fmt: skip
    await declare(config)
    return config, write_config(tmp_path, config)


async def publish(config: WarrenConfig, events: list[Event]) -> None:
    connection = await connect(config.broker.url)
    try:
        publisher = await Publisher.open(connection, config.broker.prefix)
        report = await publisher.publish_many(events)
        assert not report.failed, report.failed
    finally:
        await connection.close()


async def test_the_text_view_shows_each_endpoint_its_queues_and_dead_letters(
    shop_and_books: tuple[WarrenConfig, Path],
) -> None:
    # Given 3 events waiting for shop, 2 for books (one per key), and 4 dead letters of shop
    config, path = shop_and_books
    prefix = config.broker.prefix
    await publish(config, [Event(type="order.paid", data={"i": i}) for i in range(3)])
    await publish(config, [Event(type="book.sold", data={}, key=f"k{i}") for i in range(2)])
    await seed_dead_letters(config, "shop", [Event(type="order.paid", data={}) for _ in range(4)])
    assert await wait_depth(config, names.dlq(prefix, "shop"), 4) == 4
    # When the operator asks for the status (the default text view), for all endpoints and for one
    everything = await warren("status", "--config", str(path))
    only_books = await warren("status", "--config", str(path), "--endpoints", "books")
    # Then the header names the vhost and prefix, each endpoint its ordering, state and dead letters
    assert everything.code == 0, everything.err
    out = everything.out
    assert f"prefix {prefix!r}" in out.splitlines()[0] and "Warren status" in out.splitlines()[0]
    assert "shop · unordered · state active · dead letters 4" in out
    assert "books · ordered by key · state active · dead letters 0" in out
    # And each queue with its exact ready count (the books partitions hold 2 between them, with a total row)
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 3}
    assert rows[names.work_queue(prefix, "shop")].split("│")[2].strip() == "3"
    partitions = [names.partition_queue(prefix, "books", i) for i in range(2)]
    assert sum(int(rows[p].split("│")[2]) for p in partitions) == 2
    assert rows["total"].split("│")[2].strip() == "2"
    assert "0 retries waiting" in out and "exact (AMQP" in out
    # And --endpoints shows only the endpoints named
    assert only_books.code == 0, only_books.err
    assert "books · ordered by key" in only_books.out and "shop ·" not in only_books.out


async def test_status_refuses_an_unknown_endpoint_and_a_bad_interval(shop_and_books: tuple[WarrenConfig, Path]) -> None:
    _, path = shop_and_books
    unknown = await warren("status", "--config", str(path), "--endpoints", "shop,nope")
    zero = await warren("status", "--config", str(path), "--watch", "--interval", "0s")
    garbled = await warren("status", "--config", str(path), "--watch", "--interval", "soon")
    assert unknown.code == 2 and "unknown endpoint(s): nope" in unknown.err
    assert zero.code == 2 and "--interval must be positive" in zero.err
    assert garbled.code == 2 and "--interval" in garbled.err


async def test_watch_refreshes_at_its_interval_until_interrupted(shop_and_books: tuple[WarrenConfig, Path]) -> None:
    # Given a watch of shop alone, one JSON document per refresh, every 300 ms
    config, path = shop_and_books
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "warren", "status", "--config", str(path), "--watch", "--json", "--interval", "300ms",
        "--endpoints", "shop", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env(),
    )  # fmt: skip
    assert process.stdout is not None
    try:
        documents: list[tuple[float, dict[str, Any]]] = []

        async def next_document() -> dict[str, Any]:
            assert process.stdout is not None
            line = await asyncio.wait_for(process.stdout.readline(), 15)
            assert line, "the watch ended"
            document: dict[str, Any] = json.loads(line)
            documents.append((time.monotonic(), document))
            return document

        first = await next_document()
        # When an event arrives for shop between two refreshes
        await publish(config, [Event(type="order.paid", data={})])
        while True:
            latest = await next_document()
            if latest["endpoints"][0]["totals"]["ready"] == 1:
                break
            assert len(documents) < 20, "the watch never saw the new event"
        await next_document()
        # Then each refresh shows the broker anew (0, then 1 ready), only for shop, about 300 ms apart
        assert [e["name"] for e in first["endpoints"]] == ["shop"] and first["endpoints"][0]["totals"]["ready"] == 0
        # Timed where the test reads them, so a document read late (a busy machine) makes the next gap short:
        # document k cannot come before k interval periods from the start (no refresh without the wait), and
        # on average one comes per interval plus the time a snapshot takes (the default 2 s would fail this)
        reads = [at - started for at, _ in documents]
        assert all(at >= 0.3 * k for k, at in enumerate(reads)), reads
        gaps = [b - a for a, b in itertools.pairwise(reads)]
        assert sum(gaps) / len(gaps) < 1.5, gaps
        # When interrupted (Ctrl-C), Then it stops, cleanly (in about a second even on a busy machine; the 30 s
        # bound is a hang guard: with two whole suites at once the 10 s it was passed twice, cause not found)
        process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        assert await asyncio.wait_for(process.wait(), 30) == 0
        print(f"\nwatch stopped {time.monotonic() - interrupted:.2f}s after SIGINT")
    finally:
        signal_child(process)
        await process.wait()


async def _line(stream: asyncio.StreamReader | None, timeout: float = 15) -> str:
    assert stream is not None
    line = await asyncio.wait_for(stream.readline(), timeout)
    assert line, "the watch ended"
    return line.decode()


async def test_a_watch_goes_on_through_a_lost_broker_and_ctrl_c_ends_it_while_the_broker_hangs(
    shop_and_books: tuple[WarrenConfig, Path], tmp_path: Path
) -> None:
    # Given a JSON watch of shop every 200 ms, reaching RabbitMQ through a proxy the test controls
    config, _ = shop_and_books
    async with TcpProxy(urlsplit(config.broker.url).port or 5672) as proxy:
        broker = config.broker.model_copy(update={"url": through(config.broker.url, proxy.port)})
        path = write_config(tmp_path, config.model_copy(update={"broker": broker}))
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "warren", "status", "--config", str(path), "--watch", "--json", "--interval",
            "200ms", "--endpoints", "shop", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=clean_env(),
        )  # fmt: skip
        try:
            assert json.loads(await _line(process.stdout))["endpoints"][0]["name"] == "shop"
            # When RabbitMQ cannot be reached (every link cut, new ones refused)
            await proxy.cut()
            # Then the watch says why on stderr, in one line, and goes on
            error = await _line(process.stderr)
            assert error.startswith("error: ") and "trying again every 0.2s" in error, error
            assert "Traceback" not in error
            # And once RabbitMQ is back, documents come again on stdout
            await proxy.restore()
            while True:  # documents written before the cut may still be in the pipe; one after it must come
                document = json.loads(await _line(process.stdout))
                if proxy.accepted > 1:
                    break
            assert document["endpoints"][0]["totals"]["ready"] == 0
            # When RabbitMQ then hangs (links open, no byte forwarded) and the operator presses Ctrl-C
            proxy.stall()
            await asyncio.sleep(0.5)  # the next refresh is waiting on the stalled link
            process.send_signal(signal.SIGINT)
            interrupted = time.monotonic()
            # Then the watch ends cleanly within the interrupt grace (a lost cancellation held it past 15 s)
            assert await asyncio.wait_for(process.wait(), INTERRUPT_GRACE + 20) == 0
            assert time.monotonic() - interrupted < INTERRUPT_GRACE + 5
            print(f"\nwatch stopped {time.monotonic() - interrupted:.2f}s after SIGINT, RabbitMQ hanging")
        finally:
            proxy.resume()
            signal_child(process)
            await process.wait()


def test_the_text_view_shows_the_routing_stage_and_its_dead_letters_when_lanes_are_on() -> None:
    from rich.console import Console

    from warren.broker.status import ORDERED_LANE_ROLE, ROUTE_DLQ_ROLE, ROUTE_PARTITION_ROLE, QueueRow, Status
    from warren.commands.status_cmd import render_status

    def row(name: str, role: str, ready: int, exists: bool = True) -> QueueRow:
        return QueueRow(name, role, exists, ready, 1, 0, None, None)

    def text(status: Status) -> str:
        console = Console(width=250, record=True)
        console.print(render_status(status))
        return console.export_text()

    base = Status(0, "/", "w", (), (), None)
    assert "routing stage" not in text(base)  # lanes off: no row
    # the rows collect_status makes: the partitions, the route DLQ, the ordered lanes
    rows = (
        row("w.route.p0", f"{ROUTE_PARTITION_ROLE} 0", 3),
        row("w.route.p1", f"{ROUTE_PARTITION_ROLE} 1", 1),
        row("w.route.dlq", ROUTE_DLQ_ROLE, 2),
        row("w.lane.o0", f"{ORDERED_LANE_ROLE} 0", 5),
    )
    with_lanes = Status(0, "/", "w", (), (), None, rows)
    shown = text(with_lanes)
    assert [r["ready"] for r in with_lanes.to_json()["routing"]] == [3, 1, 2, 5] and not base.to_json()["routing"]
    assert (
        "routing stage (lane endpoints) · 4 events waiting (w.route.p0 … w.route.p1) · 2 dead letters (w.route.dlq)"
        " · 5 in the ordered lanes (w.lane.o0)"
    ) in shown
    missing = text(Status(0, "/", "w", (), (), None, (rows[0], row("w.route.dlq", ROUTE_DLQ_ROLE, 0, exists=False))))
    assert "w.route.dlq missing: run warren setup" in missing


def test_the_text_view_shows_retries_the_dead_letter_worker_holds() -> None:
    from rich.console import Console

    from warren.broker.status import DelayLevel, QueueRow, Status
    from warren.commands.status_cmd import render_status

    def level(k: int, ready: int, held: int | None) -> DelayLevel:
        queue = QueueRow(f"w.delay.l{k:02d}.q", f"delay 2^{k} ms", True, ready, 0, 0, None, None, held)
        return DelayLevel(k, 1 << k, queue)

    def text(status: Status) -> str:
        console = Console(width=250, record=True)
        console.print(render_status(status))
        return console.export_text()

    # Given a chain where level 3 waits out 2 retries and level 5's dead-letter worker holds 7 on their way back
    held = Status(0, "/", "w", (), (level(0, 0, 0), level(3, 2, 0), level(5, 0, 7), level(6, 0, None)), None)
    shown = text(held)
    # Then the heading counts both, and the table names the level holding them (levels holding nothing left out)
    assert "2 retries waiting · 7 held by RabbitMQ's dead-letter worker, on their way back" in shown
    assert [line.split()[1] for line in shown.splitlines() if "w.delay.l" in line] == ["w.delay.l03.q", "w.delay.l05.q"]
    assert held.to_json()["retries_held"] == 7 and held.to_json()["delay"][2]["queue"]["held"] == 7
    # While a chain holding none says nothing of it (held unknown, without a management sample, counts as none)
    calm = Status(0, "/", "w", (), (level(0, 0, None), level(3, 2, 0)), None)
    assert "held" not in text(calm) and calm.retries_held == 0


async def test_warren_status_with_lanes_on_shows_the_routing_stage(make_config: Any, tmp_path: Path) -> None:
    # Given lanes on, with an unordered and an ordered lane endpoint, set up on a real broker
    hook = {"url": "http://127.0.0.1:9/h", "events": ["order.*"], "home": "lane"}
    config = make_config(
        [{**hook, "name": "tail"}, {**hook, "name": "keyed", "ordering": "key"}],
        lanes={"count": 2, "route_partitions": 2, "ordered_count": 2},
    )
    await declare(config)
    path = write_config(tmp_path, config)
    # When `warren status` runs (the text view and --json)
    code, out, err = await warren("status", "--config", str(path))
    json_code, json_out, json_err = await warren("status", "--config", str(path), "--json")
    # Then it answers, with the routing stage's partitions, DLQ and ordered lanes
    assert code == 0, err
    prefix = config.broker.prefix
    assert f"0 events waiting ({prefix}.route.p0 … {prefix}.route.p1)" in " ".join(out.split())
    assert f"0 in the ordered lanes ({prefix}.lane.o0 … {prefix}.lane.o1)" in " ".join(out.split())
    assert json_code == 0, json_err
    routing = json.loads(json_out)["routing"]
    assert [r["name"] for r in routing] == [
        f"{prefix}.route.p0",
        f"{prefix}.route.p1",
        f"{prefix}.route.dlq",
        f"{prefix}.lane.o0",
        f"{prefix}.lane.o1",
    ]
