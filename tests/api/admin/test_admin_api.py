"""The admin API against a real RabbitMQ and each store: CRUD, secrets, states, the file's endpoints, test sends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
from standardwebhooks import Webhook

from tests.api.admin.conftest import ADMIN_TOKEN, AdminServer
from tests.api.ingest.conftest import TOKEN
from tests.support.receiver import Receiver, always
from warren.api.admin.app import SERVICE

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = pytest.mark.timeout(30)


def spec(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "url": "http://127.0.0.1:9/hook", "events": ["order.*"], **fields}


async def test_create_read_and_reveal_keep_the_secret_out_of_every_other_answer(start_admin: Start) -> None:
    # Given the admin API
    admin = await start_admin()
    # When a tenant's endpoint is created without a secret
    created = await admin.call(
        "POST", "/v1/endpoints", spec("acme-orders", tenant="acme", ordering="key", partitions=2)
    )
    # Then it is applied to RabbitMQ (through the applier) with a generated secret, shown this once
    assert created.status == 201, created.body
    secret = created.body["secret"]
    assert secret.startswith("whsec_") and created.body["tenant"] == "acme" and created.body["managed_by"] == "api"
    [applied] = admin.applier.applied
    assert applied.name == "acme-orders" and applied.partition_count == 2 and applied.tenant == "acme"
    assert [s.reveal() for s in applied.secret] == [secret]
    # And reading it shows its state and options but never the secret
    read = await admin.call("GET", "/v1/endpoints/acme-orders")
    assert read.status == 200 and read.body["state"] == "active"
    assert read.body["options"] == {"ordering": "key", "partitions": 2, "home": "dedicated"}
    assert secret not in str(read.body) and "secret" not in read.body
    # And only the explicit reveal returns it
    revealed = await admin.call("GET", "/v1/endpoints/acme-orders/secret")
    assert [s["secret"] for s in revealed.body["secrets"]] == [secret]
    # And the same name cannot be created twice
    again = await admin.call("POST", "/v1/endpoints", spec("acme-orders"))
    assert (again.status, again.body["error"]) == (409, "endpoint_exists")


async def test_admin_and_producer_tokens_are_separate(start_admin: Start) -> None:
    admin = await start_admin()
    producer = await admin.call("GET", "/v1/endpoints", token=TOKEN)
    missing = await admin.call("GET", "/v1/endpoints", token=None)
    assert (producer.status, missing.status) == (401, 401)
    publish = await admin.api.post("/v1/events", {"type": "order.created", "data": {}}, token=ADMIN_TOKEN)
    assert publish.status == 401


async def test_invalid_endpoints_are_refused_with_the_field_and_nothing_is_applied(start_admin: Start) -> None:
    admin = await start_admin(delivery={"allow_private_networks": False})
    bad_url = await admin.call("POST", "/v1/endpoints", spec("x", url="ftp://example.com"))
    private = await admin.call("POST", "/v1/endpoints", spec("y", url="http://10.0.0.1/hook"))
    unknown = await admin.call("POST", "/v1/endpoints", {**spec("z"), "colour": "blue"})
    stringly = await admin.call("POST", "/v1/endpoints", spec("w", concurrency="3"))
    assert (bad_url.status, bad_url.body["error"]) == (422, "invalid_endpoint")
    assert (private.status, private.body["error"]) == (422, "invalid_endpoint") and "private" in private.body["message"]
    assert (unknown.status, unknown.body["error"]) == (422, "invalid_request")
    assert stringly.status == 422 and stringly.body["fields"][0]["field"] == "concurrency"
    assert admin.applier.applied == []


async def test_list_pages_and_filters_by_tenant_event_type_and_state(start_admin: Start) -> None:
    # Given five endpoints of two tenants, one subscribed to invoices, one paused
    admin = await start_admin()
    for i in range(5):
        events = ["invoice.*"] if i == 4 else ["order.*"]
        body = spec(f"ep-{i}", tenant="acme" if i < 3 else "globex", events=events)
        assert (await admin.call("POST", "/v1/endpoints", body)).status == 201
    paused = await admin.call("POST", "/v1/endpoints/ep-1/pause", {"reason": "maintenance"})
    assert paused.body == {"name": "ep-1", "state": "paused", "changed": True}
    # When listing a page at a time
    first = await admin.call("GET", "/v1/endpoints?limit=2")
    second = await admin.call("GET", f"/v1/endpoints?limit=2&cursor={first.body['next_cursor']}")
    third = await admin.call("GET", f"/v1/endpoints?limit=2&cursor={second.body['next_cursor']}")
    names = [e["name"] for page in (first, second, third) for e in page.body["data"]]
    assert names == [f"ep-{i}" for i in range(5)] and third.body["next_cursor"] is None

    # Then each filter selects what it says
    async def names_of(query: str) -> list[str]:
        reply = await admin.call("GET", f"/v1/endpoints?{query}")
        assert reply.status == 200, reply.body
        return [e["name"] for e in reply.body["data"]]

    assert await names_of("tenant=globex") == ["ep-3", "ep-4"]
    assert await names_of("event_type=invoice.paid") == ["ep-4"]
    assert await names_of("state=paused") == ["ep-1"]
    assert await names_of("state=active&tenant=acme") == ["ep-0", "ep-2"]
    bad = await admin.call("GET", "/v1/endpoints?limit=0")
    assert (bad.status, bad.body["error"]) == (422, "invalid_request")


async def test_update_reapplies_and_keeps_the_secret(start_admin: Start) -> None:
    admin = await start_admin()
    created = await admin.call("POST", "/v1/endpoints", spec("acme", tenant="acme"))
    updated = await admin.call("PATCH", "/v1/endpoints/acme", {"url": "http://127.0.0.1:9/v2", "concurrency": 4})
    assert updated.status == 200, updated.body
    assert updated.body["url"].endswith("/v2") and updated.body["version"] == 2 and updated.body["tenant"] == "acme"
    latest = admin.applier.applied[-1]
    assert latest.concurrency == 4 and latest.tenant == "acme"
    assert [s.reveal() for s in latest.secret] == [created.body["secret"]]
    platform = await admin.call("PATCH", "/v1/endpoints/acme", {"tenant": None, "concurrency": None})
    assert platform.body["tenant"] is None and "concurrency" not in platform.body["options"]
    assert admin.applier.applied[-1].concurrency == 16  # back to the default
    no_url = await admin.call("PATCH", "/v1/endpoints/acme", {"url": None})
    assert (no_url.status, no_url.body["error"]) == (422, "invalid_endpoint")
    missing = await admin.call("PATCH", "/v1/endpoints/nope", {"concurrency": 2})
    assert (missing.status, missing.body["error"]) == (404, "not_found")


async def test_changes_to_one_endpoint_at_once_leave_the_workers_on_what_the_store_keeps(start_admin: Start) -> None:
    admin = await start_admin()
    created = await admin.call("POST", "/v1/endpoints", spec("acme"))
    assert created.status == 201, created.body
    # Given an apply that returns late the first time (the store is written after the apply returns)
    admin.applier.pauses = [0.3]
    # When two changes of the endpoint come at once, and then two rotations
    changes = await asyncio.gather(
        *(admin.call("PATCH", "/v1/endpoints/acme", {"url": f"http://127.0.0.1:9/{n}"}) for n in ("a", "b"))
    )
    assert [c.status for c in changes] == [200, 200], [c.body for c in changes]
    # Then the workers were told last what the store keeps (with both at once, the later apply was the earlier
    # write: the store kept one URL and the workers served the other)
    stored = await admin.call("GET", "/v1/endpoints/acme")
    assert admin.applier.applied[-1].url == stored.body["url"] and stored.body["version"] == 3
    admin.applier.pauses = [0.3]
    rotations = await asyncio.gather(*(admin.call("POST", "/v1/endpoints/acme/rotate-secret", {}) for _ in "ab"))
    assert [r.status for r in rotations] == [200, 200], [r.body for r in rotations]
    revealed = await admin.call("GET", "/v1/endpoints/acme/secret")
    signing = sorted(s["secret"] for s in revealed.body["secrets"])
    assert sorted(s.reveal() for s in admin.applier.applied[-1].secret) == signing and len(signing) == 3


async def test_rotation_signs_with_both_secrets_until_the_grace_period_ends(start_admin: Start) -> None:
    # Given an endpoint with its first secret
    admin = await start_admin()
    created = await admin.call("POST", "/v1/endpoints", spec("acme"))
    old = created.body["secret"]
    # When its secret rotates with a one-hour grace period
    rotated = await admin.call("POST", "/v1/endpoints/acme/rotate-secret", {"grace": 3600})
    assert rotated.status == 200, rotated.body
    new = rotated.body["secret"]
    # Then workers are told to sign with the new and the old secret, and the reveal lists both, newest first
    assert [s.reveal() for s in admin.applier.applied[-1].secret] == [new, old]
    revealed = await admin.call("GET", "/v1/endpoints/acme/secret")
    assert [s["secret"] for s in revealed.body["secrets"]] == [new, old]
    assert revealed.body["secrets"][0]["expires_at"] is None and revealed.body["secrets"][1]["expires_at"]
    # And a rotation with no grace drops the old secrets at once
    await admin.call("POST", "/v1/endpoints/acme/rotate-secret", {"grace": 0})
    assert len(admin.applier.applied[-1].secret) == 1


async def test_delete_refused_while_it_holds_messages_unless_forced(start_admin: Start) -> None:
    admin = await start_admin()
    await admin.call("POST", "/v1/endpoints", spec("acme"))
    admin.applier.holding.add("acme")
    refused = await admin.call("DELETE", "/v1/endpoints/acme")
    assert (refused.status, refused.body["error"]) == (409, "refused") and "holds 3 messages" in refused.body["message"]
    assert (await admin.call("GET", "/v1/endpoints/acme")).status == 200
    forced = await admin.call("DELETE", "/v1/endpoints/acme?force=true")
    assert forced.status == 204 and admin.applier.removed == [("acme", True)]
    assert (await admin.call("GET", "/v1/endpoints/acme")).status == 404


async def test_the_files_endpoints_are_listed_but_only_warren_setup_changes_them(start_admin: Start) -> None:
    # Given a file endpoint reconciled into the store (as `warren setup` does)
    admin = await start_admin([{"name": "from-file", "url": "http://127.0.0.1:9/f", "events": ["#"]}])
    service = await admin.api.app[SERVICE].get()
    await service.store.reconcile_file(admin.config.endpoints)
    listed = await admin.call("GET", "/v1/endpoints?managed_by=file")
    assert [e["name"] for e in listed.body["data"]] == ["from-file"]
    # Then every change is refused with 409 file_managed, naming the way to change it
    for method, path, body in [
        ("PATCH", "/v1/endpoints/from-file", {"concurrency": 2}),
        ("DELETE", "/v1/endpoints/from-file", None),
        ("POST", "/v1/endpoints/from-file/rotate-secret", {}),
        ("GET", "/v1/endpoints/from-file/secret", None),
        ("POST", "/v1/endpoints", spec("from-file")),
    ]:
        reply = await admin.call(method, path, body)
        assert (reply.status, reply.body["error"]) == (409, "file_managed"), (method, path, reply.body)
        assert "configuration file" in reply.body["message"]
    # But its runtime state changes as with `warren endpoint pause`
    paused = await admin.call("POST", "/v1/endpoints/from-file/pause")
    resumed = await admin.call("POST", "/v1/endpoints/from-file/resume")
    assert (paused.body["state"], resumed.body["state"]) == ("paused", "active")
    assert admin.applier.applied == []


async def test_test_sends_a_signed_event_now_and_returns_the_outcome(start_admin: Start) -> None:
    admin = await start_admin()
    async with Receiver() as good, Receiver(always(503)) as failing:
        created = await admin.call("POST", "/v1/endpoints", spec("good", url=good.url))
        await admin.call("POST", "/v1/endpoints", spec("failing", url=failing.url))
        # When each is tested
        ok = await admin.call("POST", "/v1/endpoints/good/test", {"type": "order.test", "data": {"n": 1}})
        bad = await admin.call("POST", "/v1/endpoints/failing/test")
    # Then the good one got a request that verifies with its secret, and the answer says so
    assert ok.status == 200 and ok.body["delivered"] is True and ok.body["status"] == 200, ok.body
    [request] = good.received
    payload = Webhook(created.body["secret"]).verify(request.body, dict(request.headers))
    assert payload["type"] == "order.test" and payload["data"] == {"n": 1} and payload["id"] == ok.body["event_id"]
    # And the failing one's outcome is a retry with the status, not an error of the API
    assert bad.status == 200 and bad.body["delivered"] is False
    assert (bad.body["outcome"], bad.body["status"]) == ("retry", 503)
    assert len(failing.received) == 1


async def test_a_rotated_out_secret_carries_its_end_and_the_sweep_only_tidies_the_store(start_admin: Start) -> None:
    # Given an endpoint whose secret rotated with a 2 s grace period
    admin = await start_admin()
    await admin.call("POST", "/v1/endpoints", spec("acme"))
    started = time.time()
    rotated = await admin.call("POST", "/v1/endpoints/acme/rotate-secret", {"grace": 2})
    # Then the workers were told both secrets, the old one with its end: they stop signing with it then, by themselves
    told = admin.applier.applied[-1].secret
    assert len(told) == 2 and next(iter(told)).reveal() == rotated.body["secret"]
    [end] = [s.expires_at for s in told if s.expires_at is not None]
    assert started + 2 <= end <= time.time() + 2
    assert len(told.signing(end - 0.01)) == 2
    assert [s.reveal() for s in told.signing(end)] == [rotated.body["secret"]]
    applies = len(admin.applier.applied)
    service = await admin.api.app[SERVICE].get()
    assert await service.expire_secrets() == []  # not over yet
    # When the sweep runs until the grace period is over
    while True:
        began = time.time()
        if expired := await service.expire_secrets():
            break
        # Then no sweep begun after the end leaves it (the first such sweep ends it: a clock's worth of slack)
        assert began < end + 0.5, f"a sweep begun {began - end:.2f} s after the end found nothing to expire"
        await asyncio.sleep(0.05)
    # And the sweep that ended it began once the grace period was over, not before. (Measured by the sweeps, not
    # the wall clock: on a loaded CI machine the loop took 10 s where 2 were due, and "< 6 s" failed.)
    assert expired == ["acme"] and began >= end - 0.05 and began - started >= 1.95
    # And it only tidied the store: nothing was applied again, and the store forgets the old one
    assert len(admin.applier.applied) == applies
    read = await admin.call("GET", "/v1/endpoints/acme")
    assert [s["expires_at"] for s in read.body["secrets"]] == [None]
