"""Reading a DLQ never spends a message: the real CLI, many times over, on 3.10 and on 4.x.

Each ``warren dlq list`` returns every message to the queue once. On RabbitMQ 4.0.5 with its default
delivery limit of 20, the 21st listing emptied the DLQ; with Warren's limit nothing is ever lost to reading.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aio_pika
import pytest

from tests.support.cli import warren
from tests.support.dead_letters import peek_ids, seed_dead_letters, wait_depth
from tests.support.processes import write_config
from tests.support.topology import declare
from warren.broker.dlq import browse
from warren.broker.events import Event
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(180)

# Past 4.x's default limit of 20 (the 21st listing emptied the DLQ there), with the 9 other reads below on top.
# A CLI process costs seconds on a loaded machine (34 of them took 240 s with two whole suites at once on these
# 2 cores), so 4 listings are the real CLI and the other 20 the read it makes (browse), in this process.
CLI_LISTINGS = 4
READS = 20


async def test_listing_showing_and_filtered_reads_never_spend_a_dead_letter(make_config: Any, tmp_path: Path) -> None:
    # Given an endpoint with 5 dead letters, its topology declared as `warren setup` does
    config: WarrenConfig = make_config(
        [{"name": "down", "url": "http://127.0.0.1:9/hook", "events": ["#"], "circuit": {"enabled": False}}]
    )
    await declare(config)
    events = [Event(type=f"t.{i}", data={"i": i}) for i in range(5)]
    await seed_dead_letters(config, "down", events)
    dlq = names.dlq(config.broker.prefix, "down")
    path = str(write_config(tmp_path, config))
    ids = [e.id for e in events]
    # When `warren dlq list` runs 4 times, and the DLQ is read 20 more times as it reads it
    for run in range(CLI_LISTINGS):
        listed = await warren("dlq", "list", "down", "--config", path)
        # Then every listing shows all 5, in order
        assert listed.code == 0, listed.err
        assert "5 shown of 5 dead letter(s)" in listed.out, f"listing {run + 1}: {listed.out[-300:]}"
    connection = await aio_pika.connect(config.broker.url)
    try:
        for run in range(READS):
            letters, depth = await browse(connection, dlq)
            assert (depth, [letter.event_id for letter in letters]) == (5, ids), f"read {CLI_LISTINGS + run + 1}"
    finally:
        await connection.close()
    # And `show`, a filtered replay's dry run and a declined purge read it 9 more times without spending
    for _ in range(3):
        shown = await warren("dlq", "show", "down", ids[2], "--config", path)
        assert shown.code == 0 and ids[2] in shown.out, shown.err
        dry = await warren("dlq", "replay", "down", "--ids", ids[0], "--dry-run", "--config", path)
        assert dry.code == 0 and "1 of 5 dead letter(s) would be replayed" in dry.out, dry.out + dry.err
        declined = await warren("dlq", "purge", "down", "--config", path, stdin=b"n\n")
        assert declined.code == 1 and "nothing deleted" in declined.err
    assert await peek_ids(config, dlq) == ids
    # When a filtered replay moves one of them for real
    moved = await warren("dlq", "replay", "down", "--ids", ids[0], "--config", path)
    # Then exactly that one left; the other four stayed, in order, after 33 reads of the queue
    assert moved.code == 0 and "replayed 1 dead letter(s)" in moved.out, moved.out + moved.err
    assert await wait_depth(config, dlq, 4) == 4
    assert await peek_ids(config, dlq) == ids[1:]
