"""A rotated-out secret stops signing at its end in the worker itself, with no `warren api` (and no sweep) running.

The deployment rotates through the CLI only (`warren endpoint rotate-secret`), as one without the admin API does;
the worker, a real process, must stop signing with the old secret within a second of its grace period's end.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.api.admin.flow_support import verifies
from tests.conftest import TEST_STORE_KEY
from tests.support.event_flow import TenantFlow
from tests.support.processes import running_workers, write_config
from tests.support.receiver import Received, Receiver
from tests.support.topology import declare
from warren.cli import app
from warren.topology.config import WarrenConfig

GRACE = 2.0  # the rotation's grace period, seconds
WITHIN = 1.0  # the bound: the worker stops signing with the old secret this soon after its end


async def cli(*args: str) -> str:
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


@pytest.mark.timeout(90)
async def test_a_rotated_out_secret_stops_signing_at_its_end_without_the_api(
    make_config: Callable[..., WarrenConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deployment with a store and no `warren api`: endpoints are made with the CLI, delivered by a worker
    monkeypatch.setenv("WARREN_STORE_KEY", TEST_STORE_KEY)
    config = make_config(
        [],
        store={"url": f"sqlite:///{tmp_path / 'store.sqlite3'}", "keys": [TEST_STORE_KEY]},
        delivery={"grace_period": "1s"},
    )
    await declare(config)
    path = write_config(tmp_path, config)
    c = ("--config", str(path))
    async with Receiver() as receiver, running_workers(path, 1):
        created = json.loads(await cli("endpoint", "create", "rot", "--url", receiver.url, "-e", "#", "-t", "rot",
                                       "--concurrency", "1", *c, "--json"))  # fmt: skip
        old = created["secret"]
        async with TenantFlow(config, ["rot"], interval=0.02) as flow:
            await receiver.wait_for(lambda r: len(r.received) >= 10, timeout=15)
            # When its secret rotates with a 2 s grace period, from the command line, events still flowing
            asked = time.monotonic()
            rotated = json.loads(await cli("endpoint", "rotate-secret", "rot", "--grace", f"{GRACE:g}s", *c, "--json"))
            # (the end the worker was told: the rotation's moment, inside the call, plus the grace; at the latest)
            ends = time.monotonic() + GRACE
            new = rotated["secret"]
            await receiver.wait_for(lambda r: any(r.at > ends + WITHIN + 1.0 for r in r.received), timeout=15)
            await flow.stop()

    def signed_by(r: Received) -> tuple[bool, bool]:
        headers = dict(r.headers)
        return verifies(old, r.body, headers), verifies(new, r.body, headers)

    # Then until the end the old secret kept signing (beside the new one once the worker re-served the endpoint),
    # and in the grace period deliveries carried both signatures
    before_end = [signed_by(r) for r in receiver.received if r.at < asked + GRACE - 0.1]
    assert all(old_signed for old_signed, _ in before_end), before_end
    assert sum(pair == (True, True) for pair in before_end) >= 5, before_end
    # And from a second after the end on, the new secret alone signed: the worker stopped by itself
    late = [signed_by(r) for r in receiver.received if r.at >= ends + WITHIN]
    assert len(late) >= 10, "too few deliveries after the end to show it"
    assert all(pair == (False, True) for pair in late), late
