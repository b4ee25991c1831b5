"""A receiver of Warren's webhooks built with the toolkit: verify, then apply each event exactly once.

It keeps a ledger of paid invoices per customer in SQLite. Warren (or any Standard Webhooks sender) may
deliver an event more than once and, across keys, out of order; the ledger still changes once per event,
and an older version of an invoice never overwrites a newer one.

Run it::

    export RECEIVER_SECRET=whsec_...        # the endpoint's secret in warren.toml
    python examples/receiver_app.py          # serves http://127.0.0.1:8090/webhooks/warren

This version processes inside the request and answers 200 once the effect is committed (simple, and the
sender's retries cover failures). For slow handlers, use ``warren receive`` + ``warren inbox`` instead, with
``handler = "examples.receiver_app:on_invoice_event"``: the same function, called from the inbound queue.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from warren.receiving import (
    IdempotentConsumer,
    InboundEvent,
    StandardWebhooksVerifier,
    Transaction,
    verified_handler,
)
from warren.receiving.middleware import error_response
from warren.receiving.stores.sqlite import SqliteStore
from warren.topology.secrets import SigningSecrets, WebhookSecret

LEDGER = """CREATE TABLE IF NOT EXISTS invoices (
    invoice_id TEXT PRIMARY KEY,
    customer TEXT NOT NULL,
    amount INTEGER NOT NULL,
    status TEXT NOT NULL
)"""

CONSUMER = web.AppKey("consumer", IdempotentConsumer)


async def on_invoice_event(event: InboundEvent, tx: Transaction) -> None:
    """Apply one invoice event. Runs inside the idempotency transaction: write through ``tx`` only."""
    envelope = event.json()
    data = envelope["data"]
    await tx.execute(
        """INSERT INTO invoices (invoice_id, customer, amount, status) VALUES ($1, $2, $3, $4)
           ON CONFLICT (invoice_id) DO UPDATE SET amount = excluded.amount, status = excluded.status""",
        data["invoice"],
        data["customer"],
        int(data["amount"]),
        envelope["type"].rsplit(".", 1)[-1],
    )


async def receive(request: web.Request, body: bytes) -> web.Response:
    """The signature is already checked; deduplicate and apply, then answer."""
    event = InboundEvent(
        source="warren",
        id=request.headers["webhook-id"],
        body=body,
        headers=dict(request.headers),
        content_type=request.content_type,
    )
    try:
        envelope = event.json()
    except ValueError:
        return error_response(400, "bad_request", "the body is not JSON")
    # Warren's envelope carries the ordering key and its sequence when the producer set them.
    key, sequence = envelope.get("key"), envelope.get("sequence")
    outcome = await request.app[CONSUMER].process(
        event.id, lambda tx: on_invoice_event(event, tx), key=key, sequence=sequence
    )
    return web.json_response({"id": event.id, "outcome": outcome.value})


def build_app(secrets: SigningSecrets, database: str | Path) -> web.Application:
    store = SqliteStore(database)
    app = web.Application()
    app.router.add_post("/webhooks/warren", verified_handler(StandardWebhooksVerifier(secrets), receive))

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await store.open()
        async with store.transaction() as tx:
            await tx.execute(LEDGER)
        app[CONSUMER] = IdempotentConsumer(store, "warren")
        yield
        await store.close()

    app.cleanup_ctx.append(lifecycle)
    return app


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    texts = os.environ.get("RECEIVER_SECRET", "").split()
    if not texts:
        raise SystemExit("set RECEIVER_SECRET to the endpoint's whsec_ secret (several, space-separated, to rotate)")
    secrets = SigningSecrets(tuple(WebhookSecret(t) for t in texts))
    app = build_app(secrets, os.environ.get("RECEIVER_DB", "receiver.sqlite3"))
    web.run_app(app, host="127.0.0.1", port=int(os.environ.get("RECEIVER_PORT", "8090")))


if __name__ == "__main__":
    main()
