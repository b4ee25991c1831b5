"""Ed25519 through the admin API while events flow, with a worker process: an endpoint signing with HMAC and
Ed25519 has its Ed25519 key rotated with a grace period, then stops signing with HMAC (the end of a migration).
Every delivery is checked by the receiver's side alone, with PyNaCl and the public keys the API showed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from tests.api.admin.flow_support import Deployment, deploy, ids_at, receivers, spec, verifies
from tests.support.ed25519 import v1a_verified, versions
from tests.support.event_flow import TenantFlow
from tests.support.processes import running_workers
from tests.support.receiver import Received, Receiver
from tests.support.store import store_postgres, store_url

__all__ = ["deploy", "receivers", "store_postgres", "store_url"]


def _collapsed(phases: list[str]) -> list[str]:
    return [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]


@pytest.mark.timeout(120)
async def test_an_ed25519_key_rotated_and_hmac_dropped_mid_flow_every_delivery_verifying(
    deploy: Callable[..., Awaitable[Deployment]],
    receivers: Callable[[], Awaitable[Receiver]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an endpoint signing with HMAC and Ed25519, one delivery at a time, while events flow, and the API's
    # sweep for expired secrets every 100 ms (30 s in production)
    monkeypatch.setattr("warren.api.admin.app.SWEEP_INTERVAL", 0.1)
    deployment = await deploy()
    receiver = await receivers()
    body = spec(receiver, "mig", "mig", concurrency=1, signing=["hmac", "ed25519"])
    created = await deployment.call("POST", "/v1/endpoints", body)
    assert created.status == 201, created.body
    secret, old = created.body["secret"], created.body["public_key"]
    async with running_workers(deployment.path, 1), TenantFlow(deployment.config, ["mig"], interval=0.02) as flow:
        await receiver.wait_for(lambda r: len(ids_at(r, "mig")) >= 15, timeout=20)
        # When its Ed25519 key rotates with a 3 s grace period
        asked = time.monotonic()
        rotated = await deployment.call("POST", "/v1/endpoints/mig/rotate-secret", {"kind": "ed25519", "grace": 3})
        assert rotated.status == 200, rotated.body
        new = rotated.body["public_key"]
        # Then once the grace period is over the old key is gone from the public keys (and stops signing)
        shown: list[str] = []
        deadline = time.monotonic() + 15
        while shown != [new]:
            assert time.monotonic() < deadline, f"public keys still {shown} 15 s after a 3 s grace period"
            await asyncio.sleep(0.1)
            reply = await deployment.call("GET", "/v1/endpoints/mig/public-keys")
            shown = [k["public_key"] for k in reply.body["keys"]]
        assert time.monotonic() - asked >= 2.95

        def new_only(r: Received) -> bool:
            return v1a_verified(new, r.headers, r.body) and not v1a_verified(old, r.headers, r.body)

        await receiver.wait_for(lambda r: sum(map(new_only, r.received)) >= 15, timeout=15)
        # When the migration ends: signing = ["ed25519"]
        patched = await deployment.call("PATCH", "/v1/endpoints/mig", {"signing": ["ed25519"]})
        assert patched.status == 200, patched.body
        await receiver.wait_for(lambda r: sum(versions(x.headers) == ["v1a"] for x in r.received) >= 15, timeout=15)
        await flow.stop()
        published = {s.id for s in flow.sent}
        await receiver.wait_for(lambda r: published <= r.ok_ids(), timeout=15)  # nothing lost on the way
    deliveries = receiver.received
    # Then every delivery verified with the old or the new public key: none failed
    failing = [r.event_id for r in deliveries if not any(v1a_verified(k, r.headers, r.body) for k in (old, new))]
    assert not failing and {r.event_id for r in deliveries} == published
    # And the key switched once, in order: the old only, both (the grace period), the new only
    keys = ["new" if new_only(r) else "old" if not v1a_verified(new, r.headers, r.body) else "both" for r in deliveries]
    assert _collapsed(keys) == ["old", "both", "new"], _collapsed(keys)
    # (one loaded run saw fewer than 10 in a 2 s grace period: the worker process re-serves the endpoint then)
    assert keys.count("both") >= 5, "too few deliveries in the grace period to show it"
    # And HMAC signed each delivery (verifiably) until the migration ended, and none after
    hmac_phases = ["v1" if "v1" in versions(r.headers) else "none" for r in deliveries]
    assert _collapsed(hmac_phases) == ["v1", "none"], _collapsed(hmac_phases)
    assert all(
        verifies(secret, r.body, dict(r.headers)) for r, p in zip(deliveries, hmac_phases, strict=True) if p == "v1"
    )
