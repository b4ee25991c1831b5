"""``warren status`` right after ``warren setup``: a figure the management API has no sample of yet is `-`, and
`?` (no figure at all) always comes with its reason, on the real RabbitMQ."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.api.admin.flow_support import free_port
from tests.support.cli import warren
from tests.support.processes import write_config
from tests.support.topology import declare
from warren.broker.management import ManagementClient
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)


def figures(out: str, queue: str) -> tuple[str, str, str]:
    """The unacked, in/s and acked/s cells of ``queue``'s row in the text view."""
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) >= 7 and cells[1] == queue:
            return cells[3], cells[5], cells[6]
    raise AssertionError(f"no row for {queue} in:\n{out}")


async def test_a_queue_just_declared_shows_no_sample_yet_not_an_unexplained_question_mark(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, tmp_path: Path
) -> None:
    # Given a topology declared a moment ago: the management API lists its queues but has no sample of them yet
    # (RabbitMQ 3.10 took about 9 s for a new quorum queue). If one arrives before the command has run, the case
    # was not met: again with a new endpoint, a few times at most.
    for attempt in range(3):
        name = f"fresh{attempt}"
        config = make_config([{"name": name, "url": "http://127.0.0.1:9/x", "events": ["order.*"]}])
        await declare(config)
        path = write_config(tmp_path, config, f"warren-{attempt}.toml")
        # When the operator asks for the status at once
        run = await warren("status", "--config", str(path))
        queue = names.work_queue(config.broker.prefix, name)
        sampled: dict[str, Any] = next(q for q in await management.queues() if q["name"] == queue)
        if "messages_unacknowledged" not in sampled:
            break  # still no sample after the command: it had none either
    else:
        pytest.fail("the management API sampled each new queue before `warren status` had run, three times")
    # Then the management figures it has no sample of are `-`, never a `?` without a reason
    assert run.code == 0, run.err
    assert figures(run.out, queue) == ("-", "-", "-"), run.out
    assert "?" not in run.out and "unavailable" not in run.out, run.out


async def test_a_question_mark_comes_with_the_reason_when_the_management_api_is_unreachable(
    make_config: Callable[..., WarrenConfig], tmp_path: Path
) -> None:
    # Given the same fresh topology, and a management URL where nothing listens
    config = make_config([{"name": "shop", "url": "http://127.0.0.1:9/x", "events": ["order.*"]}])
    await declare(config)
    unreachable = config.model_copy(
        update={"broker": config.broker.model_copy(update={"management_url": f"http://127.0.0.1:{free_port()}"})}
    )
    # When the status is asked for
    run = await warren("status", "--config", str(write_config(tmp_path, unreachable)))
    # Then every management figure is `?`, the exact counts are still there, and the reason is printed
    assert run.code == 0, run.err
    assert figures(run.out, names.work_queue(config.broker.prefix, "shop")) == ("?", "?", "?"), run.out
    assert "?: unacked counts and rates unavailable: " in " ".join(run.out.split()), run.out
