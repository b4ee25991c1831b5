"""The event-type catalog through the real API on each store: declared in the file and through the API, read
by tenants, checked at ingest (422 naming the path, or a warning), exported as JSON Schema and AsyncAPI."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.api.admin.conftest import AdminServer
from tests.api.ingest.conftest import TOKEN, queue_reader, work_queue
from warren.api.ingest import catalog_source

__all__ = ["queue_reader"]

pytestmark = pytest.mark.timeout(90)

Start = Callable[..., Awaitable[AdminServer]]
PAID = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}
REFUNDED = {"type": "object", "required": ["reason"], "properties": {"reason": {"enum": ["damaged", "late"]}}}
HOOK = [{"name": "shop", "url": "https://hooks.example.com/shop", "events": ["order.*"]}]


async def publish(admin: AdminServer, data: Any, event_type: str = "order.paid") -> Any:
    return await admin.api.request("POST", "/v1/events", {"type": event_type, "data": data}, token=TOKEN)


async def test_the_catalog_is_declared_in_the_file_and_the_api_and_read_by_tenants(start_admin: Start) -> None:
    admin = await start_admin(HOOK, event_types=[{"name": "order.paid", "description": "Paid", "json_schema": PAID}])
    # When an admin declares a type through the API, then it is listed after the file's, each marked
    body = {"description": "Refunded", "json_schema": REFUNDED}
    made = await admin.call("PUT", "/v1/event-types/order.refunded", body)
    assert made.status == 201 and made.body["json_schema"] == REFUNDED, made.body
    assert (await admin.call("PUT", "/v1/event-types/order.refunded", {**body, "deprecated": True})).status == 200
    listed = await admin.call("GET", "/v1/event-types")
    assert [(t["name"], t["version"], t["managed_by"], t["deprecated"]) for t in listed.body["data"]] == [
        ("order.paid", 1, "file", False),
        ("order.refunded", 1, "api", True),
    ]
    # And a tenant's key reads it but cannot change it; the file's entry cannot be changed through the API
    key = (await admin.call("POST", "/v1/tenants/acme/keys")).body["key"]
    assert (await admin.call("GET", "/v1/event-types", token=key)).body == listed.body
    assert (await admin.call("PUT", "/v1/event-types/order.sent", {}, token=key)).status == 403
    assert (await admin.call("PUT", "/v1/event-types/order.paid", {"json_schema": PAID})).status == 409
    # And what is not a schema or not a type is refused with the field
    bad = await admin.call("PUT", "/v1/event-types/order.sent", {"json_schema": {"type": 7}})
    assert bad.status == 422 and "not a JSON Schema" in bad.body["message"]
    assert (await admin.call("PUT", "/v1/event-types/order.*", {})).status == 422
    # And the exports carry both
    bundle = await admin.call("GET", "/v1/event-types?format=jsonschema", token=key)
    assert set(bundle.body["$defs"]) == {"order.paid.v1", "order.refunded.v1"}
    asyncapi = await admin.call("GET", "/v1/event-types?format=asyncapi")
    assert asyncapi.body["asyncapi"] == "3.0.0" and set(asyncapi.body["channels"]) == {"order_paid", "order_refunded"}
    assert (await admin.call("GET", "/v1/event-types?format=yaml")).status == 422


async def test_ingest_refuses_data_that_breaks_its_schema_naming_the_path(
    start_admin: Start, queue_reader: Callable[..., Awaitable[list[Any]]]
) -> None:
    admin = await start_admin(HOOK, event_types=[{"name": "order.paid", "json_schema": PAID}])
    queue = work_queue(admin.config, "shop")
    # When an event breaks the file's schema, alone or in a batch, then 422 names the path and nothing is stored
    single = await publish(admin, {"amount": "ten"})
    assert single.status == 422 and single.body["fields"] == [
        {"field": "data.amount", "message": "'ten' is not of type 'number'"}
    ]
    batch = await admin.api.request(
        "POST",
        "/v1/events/batch",
        {"events": [{"type": "order.paid", "data": {"amount": 1}}, {"type": "order.paid", "data": {}}]},
        token=TOKEN,
    )
    assert batch.status == 422 and batch.body["fields"][0]["field"] == "events[1].data"
    with pytest.raises(AssertionError):
        await queue_reader(queue, 1, timeout=0.5)
    # And one that fits is published
    assert (await publish(admin, {"amount": 10})).status == 202
    assert len(await queue_reader(queue, 1)) == 1
    # When a type is declared through the API, then it is checked from the next request on; removed, no longer
    assert (await publish(admin, {}, "order.refunded")).status == 202
    assert (await admin.call("PUT", "/v1/event-types/order.refunded", {"json_schema": REFUNDED})).status == 201
    refused = await publish(admin, {"reason": "bored"}, "order.refunded")
    assert refused.status == 422 and refused.body["fields"][0]["field"] == "data.reason"
    # (a second version is the one checked)
    v2 = {"json_schema": {"type": "object", "required": ["reason", "amount"]}, "version": 2}
    assert (await admin.call("PUT", "/v1/event-types/order.refunded", v2)).status == 201
    assert (await publish(admin, {"reason": "bored"}, "order.refunded")).body["fields"][0]["field"] == "data"
    assert (await admin.call("DELETE", "/v1/event-types/order.refunded?version=2")).status == 204
    assert (await admin.call("DELETE", "/v1/event-types/order.refunded")).status == 204
    assert (await admin.call("DELETE", "/v1/event-types/order.refunded")).status == 404
    assert (await publish(admin, {"reason": "bored"}, "order.refunded")).status == 202
    await queue_reader(queue, 2)


async def test_another_api_process_sees_a_declared_type_within_its_refresh(
    start_admin: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two API processes (here: two applications) on one store, reading the store's types every 0.3 s
    monkeypatch.setattr(catalog_source, "REFRESH", 0.3)
    first = await start_admin(HOOK)
    second = await start_admin(HOOK)
    assert (await publish(second, {})).status == 202  # read once: no schema yet
    # When a type is declared through the first, then the second checks it within its refresh
    assert (await first.call("PUT", "/v1/event-types/order.paid", {"json_schema": PAID})).status == 201
    deadline = time.monotonic() + 5
    while (await publish(second, {})).status != 422:
        assert time.monotonic() < deadline, "the second API never read the declared type"


async def test_with_warn_a_violation_is_accepted(start_admin: Start) -> None:
    admin = await start_admin(
        HOOK, catalog={"on_invalid": "warn"}, event_types=[{"name": "order.paid", "json_schema": PAID}]
    )
    assert (await publish(admin, {"amount": "ten"})).status == 202
