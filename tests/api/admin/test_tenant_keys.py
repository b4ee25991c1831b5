"""Tenant-scoped API keys, through the real API on each store: made and shown once, listed, revoked, expired;
confined to their tenant on every admin route (another tenant's endpoint is a 404, as a missing one) and on
ingest (their own events only, their own idempotency keys)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.api.admin.conftest import ADMIN_TOKEN, AdminServer
from tests.api.ingest.conftest import TOKEN, queue_reader, work_queue
from tests.support.attempts import attempt
from tests.support.attempts import publish as publish_batches
from warren.store.attempt_records import encode_batch
from warren.topology.headers import H_TENANT

__all__ = ["queue_reader"]

pytestmark = pytest.mark.timeout(90)

Start = Callable[..., Awaitable[AdminServer]]
HOOK = "https://hooks.example.com/"


def spec(name: str, tenant: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "url": HOOK + name, "events": ["order.*"]}
    if tenant is not None:
        body["tenant"] = tenant
    return body


async def new_key(admin: AdminServer, tenant: str, **body: Any) -> dict[str, Any]:
    reply = await admin.call("POST", f"/v1/tenants/{tenant}/keys", body or None)
    assert reply.status == 201, reply.body
    created: dict[str, Any] = reply.body
    return created


async def test_a_key_is_shown_once_listed_without_itself_and_refused_once_revoked(start_admin: Start) -> None:
    admin = await start_admin()
    # When an admin makes a key of tenant acme
    created = await new_key(admin, "acme", name="portal backend")
    key = created["key"]
    # Then it is shown once, in the wtk_<id>_ form, and lists show its id and name but never the key
    assert key.startswith(f"wtk_{created['id']}_") and created["tenant"] == "acme" and created["active"] is True
    listed = await admin.call("GET", "/v1/tenants/acme/keys")
    assert listed.status == 200
    (shown,) = listed.body["data"]
    assert shown["id"] == created["id"] and shown["name"] == "portal backend" and "key" not in shown
    assert key not in str(listed.body)
    # And it works: the tenant lists its (no) endpoints
    assert (await admin.call("GET", "/v1/endpoints", token=key)).status == 200
    # When it is revoked, then the next request with it is a 401, and the list says revoked
    assert (await admin.call("DELETE", f"/v1/tenants/acme/keys/{created['id']}")).status == 204
    refused = await admin.call("GET", "/v1/endpoints", token=key)
    assert refused.status == 401 and refused.body["error"] == "unauthorized"
    (revoked,) = (await admin.call("GET", "/v1/tenants/acme/keys")).body["data"]
    assert revoked["revoked_at"] is not None and revoked["active"] is False
    # And revoking a key the tenant does not have is a 404, another tenant's included
    other = await new_key(admin, "globex")
    assert (await admin.call("DELETE", f"/v1/tenants/acme/keys/{other['id']}")).status == 404
    assert (await admin.call("DELETE", "/v1/tenants/acme/keys/0123456789abcdef")).status == 404
    assert (await admin.call("GET", "/v1/endpoints", token=other["key"])).status == 200


async def test_an_expired_key_is_refused(start_admin: Start) -> None:
    admin = await start_admin()
    # 3 s: long enough that the first call lands before the expiry on a loaded machine (0.5 s did not always)
    created = await new_key(admin, "acme", expires_in=3)
    assert (await admin.call("GET", "/v1/endpoints", token=created["key"])).status == 200
    deadline = time.monotonic() + 13
    while (await admin.call("GET", "/v1/endpoints", token=created["key"])).status != 401:
        assert time.monotonic() < deadline, "the key still works 10 s after it expired"
        await asyncio.sleep(0.1)
    (listed,) = (await admin.call("GET", "/v1/tenants/acme/keys")).body["data"]
    assert listed["active"] is False and listed["revoked_at"] is None and listed["expires_at"] is not None


async def test_a_key_cannot_manage_keys_nor_pass_for_an_admin_token(start_admin: Start) -> None:
    admin = await start_admin()
    key = (await new_key(admin, "acme"))["key"]
    for method, path in [
        ("POST", "/v1/tenants/acme/keys"),
        ("GET", "/v1/tenants/acme/keys"),
        ("DELETE", "/v1/tenants/acme/keys/0123456789abcdef"),
    ]:
        reply = await admin.call(method, path, token=key)
        assert reply.status == 403 and reply.body["error"] == "forbidden", (method, path, reply.body)
    # A key with its secret part changed, a producer token, and garbage are all refused alike
    forged = key[:-4] + ("aaaa" if not key.endswith("aaaa") else "bbbb")
    for token in (forged, TOKEN, "wtk_0123456789abcdef_x", "wtk_"):
        assert (await admin.call("GET", "/v1/endpoints", token=token)).status == 401, token


# Every admin route that names an endpoint, with a body it accepts: a tenant's key asking for another tenant's
# endpoint gets the same 404 as for a name that does not exist.
NAMED_ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "", None),
    ("PATCH", "", {"url": HOOK + "moved"}),
    ("DELETE", "", None),
    ("POST", "/rotate-secret", None),
    ("GET", "/secret", None),
    ("POST", "/pause", None),
    ("POST", "/resume", None),
    ("POST", "/disable", None),
    ("POST", "/enable", None),
    ("POST", "/test", None),
    ("POST", "/recover?since=1h", None),
    ("POST", "/replay", {"event_ids": ["evt_1"]}),
]


async def credential(admin: AdminServer, kind: str, tenant: str) -> str:
    """A tenant's key, or a portal session of the tenant: both confine a caller to it."""
    if kind == "key":
        return str((await new_key(admin, tenant))["key"])
    reply = await admin.call("POST", f"/v1/tenants/{tenant}/sessions", {"ttl": 60})
    assert reply.status == 201 and reply.body["token"].startswith("wps_"), reply.body
    return str(reply.body["token"])


@pytest.mark.parametrize("kind", ["key", "session"])
async def test_every_route_hides_another_tenants_endpoint_as_missing(start_admin: Start, kind: str) -> None:
    # Given endpoints of acme and globex, and a platform endpoint (no tenant), and a key (or a session) of acme
    admin = await start_admin()
    for name, tenant in [("acme-orders", "acme"), ("globex-orders", "globex"), ("platform", None)]:
        assert (await admin.call("POST", "/v1/endpoints", spec(name, tenant))).status == 201
    key = await credential(admin, kind, "acme")
    for method, suffix, body in NAMED_ROUTES:
        for name in ("globex-orders", "platform", "nobody"):
            # When the key asks for an endpoint that is not acme's (or none at all)
            reply = await admin.call(method, f"/v1/endpoints/{name}{suffix}", body, token=key)
            # Then the answer is the one for a missing endpoint, word for word but the name
            assert reply.status == 404, (method, suffix, name, reply.body)
            assert reply.body == {"error": "not_found", "message": f"no endpoint {name!r}"}
    # And nothing of globex's changed
    assert ("globex-orders", False) not in admin.applier.removed
    globex = await admin.call("GET", "/v1/endpoints/globex-orders")
    assert globex.body["url"] == HOOK + "globex-orders" and globex.body["state"] == "active"
    # And the key reads and changes acme's own endpoint
    assert (await admin.call("GET", "/v1/endpoints/acme-orders", token=key)).status == 200
    paused = await admin.call("POST", "/v1/endpoints/acme-orders/pause", token=key)
    assert paused.status == 200 and paused.body["state"] == "paused"


async def test_a_key_lists_and_creates_only_its_own_tenants_endpoints(start_admin: Start) -> None:
    admin = await start_admin()
    assert (await admin.call("POST", "/v1/endpoints", spec("globex-orders", "globex"))).status == 201
    key = (await new_key(admin, "acme"))["key"]
    # A create without a tenant is the key's tenant's; naming another tenant is refused and creates nothing
    made = await admin.call("POST", "/v1/endpoints", spec("acme-orders"), token=key)
    assert made.status == 201 and made.body["tenant"] == "acme"
    other = await admin.call("POST", "/v1/endpoints", spec("sneaky", "globex"), token=key)
    assert other.status == 403 and other.body["error"] == "forbidden"
    assert (await admin.call("GET", "/v1/endpoints/sneaky")).status == 404
    # Lists hold the tenant's endpoints only, whatever tenant the query names
    for query in ("", "?tenant=acme", "?tenant=globex"):
        listed = await admin.call("GET", "/v1/endpoints" + query, token=key)
        if query.endswith("globex"):
            assert listed.status == 403, listed.body
        else:
            assert [e["name"] for e in listed.body["data"]] == ["acme-orders"], query
    # And an endpoint cannot be handed to another tenant (nor made a platform one) with a key
    for tenant in ("globex", None):
        moved = await admin.call("PATCH", "/v1/endpoints/acme-orders", {"tenant": tenant}, token=key)
        assert moved.status == 403, (tenant, moved.body)
    assert (await admin.call("GET", "/v1/endpoints/acme-orders")).body["tenant"] == "acme"
    same = await admin.call("PATCH", "/v1/endpoints/acme-orders", {"tenant": "acme", "url": HOOK + "new"}, token=key)
    assert same.status == 200 and same.body["url"] == HOOK + "new"  # naming its own tenant changes nothing


async def test_a_key_reads_only_its_tenants_attempts(start_admin: Start) -> None:
    # Given one event attempted at an endpoint of acme and one of globex, and a globex attempt recorded under
    # a name acme uses now
    admin = await start_admin()
    mine = attempt(event_id="evt_shared", endpoint="acme-orders", tenant="acme")
    theirs = attempt(event_id="evt_shared", endpoint="globex-orders", tenant="globex")
    reused = attempt(event_id="evt_old", endpoint="acme-orders", tenant="globex", at=mine.at - 100)
    await publish_batches(admin.config, [encode_batch([mine, theirs, reused])])
    key = (await new_key(admin, "acme"))["key"]
    deadline = time.monotonic() + 20
    while len((await admin.call("GET", "/v1/events/evt_shared/attempts")).body["data"]) < 2:
        assert time.monotonic() < deadline, "the writer did not store the attempts"
        await asyncio.sleep(0.1)
    # When the key reads the event's and the endpoint's attempts, then it sees acme's only
    event = await admin.call("GET", "/v1/events/evt_shared/attempts", token=key)
    assert [a["id"] for a in event.body["data"]] == [mine.id]
    endpoint = await admin.call("GET", "/v1/endpoints/acme-orders/attempts", token=key)
    assert [a["id"] for a in endpoint.body["data"]] == [mine.id]
    elsewhere = await admin.call("GET", "/v1/endpoints/globex-orders/attempts", token=key)
    assert elsewhere.status == 200 and elsewhere.body["data"] == []
    # While an admin token sees all of them
    assert len((await admin.call("GET", "/v1/endpoints/acme-orders/attempts")).body["data"]) == 2


async def test_a_key_publishes_its_own_tenants_events_only(
    start_admin: Start, queue_reader: Callable[..., Awaitable[list[Any]]], tmp_path: Any
) -> None:
    # Given an endpoint of acme in the file (its queue declared), and a key of acme
    endpoints = [{"name": "acme-hook", "url": HOOK + "acme", "events": ["order.*"], "tenant": "acme"}]
    admin = await start_admin(
        endpoints, api={"idempotency_store": f"sqlite:///{tmp_path / 'idem.sqlite3'}", "publish_timeout": "3s"}
    )
    key = (await new_key(admin, "acme"))["key"]
    queue = work_queue(admin.config, "acme-hook")
    # When the key publishes an event naming no tenant, and one naming acme
    bare = await admin.call("POST", "/v1/events", {"type": "order.paid", "data": {"n": 1}}, token=key)
    named = await admin.call(
        "POST", "/v1/events", {"type": "order.paid", "data": {"n": 2}, "tenant": "acme"}, token=key
    )
    assert (bare.status, named.status) == (202, 202), (bare.body, named.body)
    # Then both are acme's events: they reach acme's endpoint, marked with the tenant
    messages = await queue_reader(queue, 2)
    assert [m.headers[H_TENANT] for m in messages] == ["acme", "acme"]
    # When it names another tenant, alone or in a batch, then nothing is published and the answer says why
    single = await admin.call("POST", "/v1/events", {"type": "order.paid", "data": {}, "tenant": "globex"}, token=key)
    batch = await admin.call(
        "POST",
        "/v1/events/batch",
        {"events": [{"type": "order.paid", "data": {}}, {"type": "order.paid", "data": {}, "tenant": "globex"}]},
        token=key,
    )
    assert single.status == 403 and single.body["error"] == "forbidden"
    assert batch.status == 403 and [f["field"] for f in batch.body["fields"]] == ["events[1].tenant"]
    with pytest.raises(AssertionError):
        await queue_reader(queue, 1, timeout=1.0)
    # And its Idempotency-Key is its own: a producer token sending the same key and body publishes anew
    body = {"type": "order.paid", "data": {"n": 3}, "tenant": "acme"}
    first = await admin.api.request("POST", "/v1/events", body, token=key, headers={"Idempotency-Key": "k-1"})
    again = await admin.api.request("POST", "/v1/events", body, token=key, headers={"Idempotency-Key": "k-1"})
    producer = await admin.api.request("POST", "/v1/events", body, token=TOKEN, headers={"Idempotency-Key": "k-1"})
    assert (first.status, again.status, producer.status) == (202, 202, 202)
    assert len(await queue_reader(queue, 2)) == 2  # the key's first, and the producer's: the retry replayed
    # And a revoked key publishes nothing
    assert (await admin.call("DELETE", f"/v1/tenants/acme/keys/{key[4:20]}")).status == 204
    assert (await admin.call("POST", "/v1/events", {"type": "order.paid", "data": {}}, token=key)).status == 401


async def test_a_portal_session_ends_by_itself_and_cannot_mint_or_publish(start_admin: Start) -> None:
    admin = await start_admin()
    reply = await admin.call("POST", "/v1/tenants/acme/sessions", {"ttl": 0.5})
    assert reply.status == 201 and reply.body["tenant"] == "acme"
    session = reply.body["token"]
    # A session is the tenant's on the admin API, and can neither mint sessions nor manage keys nor publish
    assert (await admin.call("GET", "/v1/endpoints", token=session)).status == 200
    assert (await admin.call("POST", "/v1/tenants/acme/sessions", token=session)).status == 403
    assert (await admin.call("POST", "/v1/events", {"type": "order.paid", "data": {}}, token=session)).status == 401
    # A session changed by one character, or sealed with another key, is refused
    forged = session[:-2] + ("AA" if not session.endswith("AA") else "BB")
    assert (await admin.call("GET", "/v1/endpoints", token=forged)).status == 401
    # And at its end it stops working, with nothing to revoke
    deadline = time.monotonic() + 10
    while (await admin.call("GET", "/v1/endpoints", token=session)).status != 401:
        assert time.monotonic() < deadline, "the session still works 10 s after its end"
        await asyncio.sleep(0.1)


def test_admin_token_is_not_a_key() -> None:
    from warren.store.api_keys import key_id, new_key

    ident, key = new_key()
    assert key_id(key) == ident and key_id(ADMIN_TOKEN) is None and key_id("wtk_" + "g" * 16 + "_x") is None
