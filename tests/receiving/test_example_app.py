"""The example receiver (examples/receiver_app.py) does what its docstring promises."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import orjson
from aiohttp.test_utils import TestClient, TestServer

from examples.receiver_app import build_app
from warren.topology.secrets import SigningSecrets, WebhookSecret
from warren.transport.signing import signature_header

SECRETS = SigningSecrets((WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),))


def signed(event_id: str, body: bytes) -> dict[str, str]:
    now = int(time.time())
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(now),
        "webhook-signature": signature_header(SECRETS, event_id, now, body),
        "Content-Type": "application/json",
    }


def invoice_event(event_id: str, kind: str, amount: int, sequence: int) -> bytes:
    data = {"invoice": "inv-1", "customer": "c-9", "amount": amount}
    envelope = {"id": event_id, "type": f"invoice.{kind}", "key": "inv-1", "sequence": sequence, "data": data}
    return orjson.dumps(envelope)


async def test_the_example_applies_once_ignores_stale_versions_and_rejects_forgeries(tmp_path: Path) -> None:
    database = tmp_path / "receiver.sqlite3"
    async with TestClient(TestServer(build_app(SECRETS, database), host="127.0.0.1")) as client:
        # Given invoice version 2 ("paid") delivered twice, then the older version 1 ("created") late
        paid = invoice_event("msg_2", "paid", 120, 2)
        created = invoice_event("msg_1", "created", 100, 1)
        outcomes = []
        for event_id, body in (("msg_2", paid), ("msg_2", paid), ("msg_1", created)):
            response = await client.post("/webhooks/warren", data=body, headers=signed(event_id, body))
            assert response.status == 200
            outcomes.append((await response.json())["outcome"])
        # And a forged request
        forged = await client.post(
            "/webhooks/warren", data=paid, headers={**signed("msg_2", paid), "webhook-signature": "v1,AAAA"}
        )
    # Then: applied, duplicate, stale; the ledger holds version 2; the forgery got 401
    assert outcomes == ["applied", "duplicate", "stale"]
    assert forged.status == 401
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT invoice_id, amount, status FROM invoices").fetchall() == [("inv-1", 120, "paid")]
