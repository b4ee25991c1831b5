"""Every command meets a missing vhost, or no RabbitMQ at all, with one line of its own: no traceback, no noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiormq.exceptions
import pytest

from tests.support.cli import warren
from tests.support.processes import write_config
from warren.broker.amqp.connection import link_lost

pytestmark = pytest.mark.timeout(120)

COMMANDS = [
    ("status",),
    ("dlq", "list", "acme"),
    ("dlq", "replay", "acme"),
    ("endpoint", "list"),
    ("endpoint", "pause", "acme"),
    ("publish", "--type", "order.paid", "--data", '{"n": 1}'),
]


def _config(make_config: Any, tmp_path: Path, url: str, name: str) -> Path:
    config = make_config([{"name": "acme", "url": "http://127.0.0.1:9/h", "events": ["#"]}])
    if url == MISSING_VHOST:  # the test broker's own address, with a vhost it does not have
        url = urlunsplit(urlsplit(config.broker.url)._replace(path="/no-such-vhost"))
    broken = config.model_copy(update={"broker": config.broker.model_copy(update={"url": url})})
    return write_config(tmp_path, broken, name)


MISSING_VHOST = "amqp://guest:guest@test-broker/no-such-vhost"  # stands for the test broker (see _config)
NO_BROKER = "amqp://guest:guest@127.0.0.1:1/"
# What the one line says: the missing vhost and what to do about it; or that nobody answered.
EXPECTED = {
    MISSING_VHOST: ("refused to open vhost 'no-such-vhost'", "rabbitmqctl add_vhost no-such-vhost"),
    NO_BROKER: ("error: cannot connect to RabbitMQ at amqp://***@127.0.0.1:1/",),
}


@pytest.mark.parametrize("url", [MISSING_VHOST, NO_BROKER], ids=["missing vhost", "no broker"])
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
async def test_each_command_says_it_in_one_line(
    make_config: Any, tmp_path: Path, command: tuple[str, ...], url: str
) -> None:
    # Given a configuration whose broker URL names a vhost the broker lacks, or a port nobody listens on
    path = _config(make_config, tmp_path, url, "broken.toml")
    # When the command runs
    run = await warren(*command, "--config", str(path))
    # Then it exits 1 with one line of Warren's own: no traceback, no aiormq log record before it
    assert run.code == 1, (run.out, run.err)
    assert run.out == ""
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    assert all(part in lines[0] for part in EXPECTED[url]), lines[0]


async def test_the_worker_says_the_vhost_is_missing_without_a_traceback(make_config: Any, tmp_path: Path) -> None:
    # Given the same configuration, when a worker starts with it
    path = _config(make_config, tmp_path, MISSING_VHOST, "novhost.toml")
    run = await warren("worker", "--config", str(path))
    # Then it exits 1, and its last line says why, with no traceback
    assert run.code == 1, run.err
    assert "Traceback" not in run.err + run.out
    assert "vhost 'no-such-vhost'" in run.err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        (RuntimeError('<Connection: "amqp://guest:******@127.0.0.1:5672/" at 0x7fd904b8ee90> closed'), True),
        (ConnectionResetError("reset by peer"), True),
        (aiormq.exceptions.ChannelInvalidStateError("No active transport in channel"), True),
        (RuntimeError("Event loop is closed"), False),
        (TimeoutError(), False),  # may be the management API's: not said to be the link
        (ValueError("closed"), False),
    ],
)
def test_a_lost_link_is_told_from_other_failures(error: Exception, lost: bool) -> None:
    # aiormq opening a channel on a connection that closed meanwhile (a broker restart under `warren status
    # --watch`) raises a bare RuntimeError: a command run through warren.common.run says it in one line
    assert link_lost(error) is lost
