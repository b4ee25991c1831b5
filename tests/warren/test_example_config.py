"""examples/warren.toml as an operator uses it: commands that sign nothing run without its secret variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import warren
from tests.support.rabbit import RabbitServer

pytestmark = pytest.mark.timeout(90)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "warren.toml"


async def test_only_the_worker_needs_the_signing_secret(
    amqp_url: str, rabbit_server: RabbitServer, prefix: str
) -> None:
    # Given the example configuration pointed at this test's broker, and ACME_WEBHOOK_SECRET not set
    env = {
        "WARREN_BROKER__URL": amqp_url,
        "WARREN_BROKER__MANAGEMENT_URL": rabbit_server.management_url,
        "WARREN_BROKER__PREFIX": prefix,
    }
    config = ("--config", str(EXAMPLE))
    # When the commands that sign nothing run
    runs = {
        "setup": await warren("setup", *config, env=env),
        "status": await warren("status", *config, env=env),
        "dlq list": await warren("dlq", "list", "acme", *config, env=env),
        "endpoint list": await warren("endpoint", "list", *config, env=env),
        "endpoint show": await warren("endpoint", "show", "acme", *config, env=env),
        "topology show": await warren("topology", "show", *config, env=env),
    }
    worker = await warren("worker", *config, env=env)
    # Then each of them works; only the worker, which signs, refuses to start, naming the variable
    for name, run in runs.items():
        assert run.code == 0, (name, run.out, run.err)
        assert "ACME_WEBHOOK_SECRET" not in run.err, (name, run.err)
    assert worker.code == 2 and "ACME_WEBHOOK_SECRET" in worker.err, worker.err
    assert "Traceback" not in worker.err
