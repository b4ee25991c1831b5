"""Per-endpoint headers and proxies through the admin API, on each store: validated with 422s, secret values
sealed at rest and shown as *** in every view, sent by the test send."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import select

from tests.api.admin.conftest import AdminServer
from tests.api.admin.test_tenant_keys import new_key
from tests.support.http_proxy import HttpProxy
from tests.support.receiver import Receiver
from warren.api.admin.app import SERVICE
from warren.store.tables import EndpointRow

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = pytest.mark.timeout(30)

HEADERS = {"X-Team": "billing", "Authorization": {"value": "Bearer t0p-s3cret", "secret": True}}
SHOWN = {"X-Team": "billing", "Authorization": {"value": "***", "secret": True}}


def spec(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "url": "http://127.0.0.1:9/hook", "events": ["order.*"], **fields}


async def stored_options(admin: AdminServer, name: str) -> dict[str, Any]:
    service = await admin.api.app[SERVICE].get()
    async with service.store.engine.connect() as connection:
        options: dict[str, Any] = (
            await connection.execute(select(EndpointRow.options).where(EndpointRow.name == name))
        ).scalar_one()
    return options


async def test_headers_are_applied_whole_sealed_at_rest_and_hidden_in_every_view(start_admin: Start) -> None:
    # Given the admin API of a deployment with a named proxy
    admin = await start_admin(delivery={"proxies": {"eu": "http://user:pw@10.0.0.1:3128"}})
    # When an endpoint is created with a plain and a secret header, through the proxy "eu"
    created = await admin.call("POST", "/v1/endpoints", spec("acme", headers=HEADERS, proxy="eu"))
    assert created.status == 201, created.body
    # Then workers are told the real values, and the answer shows the secret one as ***
    [applied] = admin.applier.applied
    assert applied.headers.outgoing() == {"X-Team": "billing", "Authorization": "Bearer t0p-s3cret"}
    assert applied.proxy == "eu"
    assert created.body["options"]["headers"] == SHOWN and created.body["options"]["proxy"] == "eu"
    # And the store holds the secret value sealed (the store's Fernet keys), never in plain text
    options = await stored_options(admin, "acme")
    assert "t0p-s3cret" not in str(options) and set(options["headers"]["Authorization"]) == {"sealed", "secret"}
    # And every view hides it: one endpoint, the list
    read = await admin.call("GET", "/v1/endpoints/acme")
    listed = await admin.call("GET", "/v1/endpoints")
    assert read.body["options"]["headers"] == SHOWN and "t0p-s3cret" not in str(read.body) + str(listed.body)
    # When another field is changed, the headers (sealed values included) are kept
    patched = await admin.call("PATCH", "/v1/endpoints/acme", {"concurrency": 3})
    assert patched.status == 200, patched.body
    assert admin.applier.applied[-1].headers == applied.headers
    # When the headers are changed, the table is replaced whole; null removes them
    replaced = await admin.call("PATCH", "/v1/endpoints/acme", {"headers": {"X-Other": "1"}})
    assert replaced.body["options"]["headers"] == {"X-Other": "1"}
    assert admin.applier.applied[-1].headers.outgoing() == {"X-Other": "1"}
    cleared = await admin.call("PATCH", "/v1/endpoints/acme", {"headers": None, "proxy": "direct"})
    assert "headers" not in cleared.body["options"] and cleared.body["options"]["proxy"] == "direct"
    assert not admin.applier.applied[-1].headers


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"headers": {"Webhook-Signature": "v1,forged"}}, "header 'Webhook-Signature' cannot be set on an endpoint"),
        ({"headers": {"Connection": "close"}}, "header 'Connection' cannot be set"),
        ({"headers": {"X-A": "a\r\nX-Injected: 1"}}, "holds a control character"),
        ({"headers": {"Bad Name": "x"}}, "is not an HTTP token"),
        ({"headers": {"X-A": "v" * 5000, "X-B": "v" * 5000}}, "at most 8192 in all"),
        ({"proxy": "us"}, "proxy 'us' is not one of [delivery.proxies] (eu)"),
    ],
)
async def test_invalid_headers_and_unknown_proxies_are_refused_with_422(
    start_admin: Start, fields: dict[str, Any], message: str
) -> None:
    admin = await start_admin(delivery={"proxies": {"eu": "http://10.0.0.1:3128"}})
    refused = await admin.call("POST", "/v1/endpoints", spec("acme", **fields))
    assert refused.status == 422 and message in str(refused.body), refused.body
    assert admin.applier.applied == []


async def test_the_test_send_carries_the_headers_through_the_proxy(start_admin: Start) -> None:
    async with Receiver() as receiver, HttpProxy() as proxy:
        admin = await start_admin(delivery={"allow_private_networks": True, "proxy": proxy.url})
        created = await admin.call("POST", "/v1/endpoints", spec("acme", url=receiver.url, headers=HEADERS))
        assert created.status == 201, created.body
        sent = await admin.call("POST", "/v1/endpoints/acme/test")
    assert sent.body["delivered"] is True, sent.body
    [request] = receiver.received
    assert request.headers["Authorization"] == "Bearer t0p-s3cret" and request.headers["X-Team"] == "billing"
    assert [p.target for p in proxy.passed] == [receiver.url]


async def test_a_file_endpoints_secret_header_stays_in_the_file(start_admin: Start) -> None:
    # Given a file endpoint with a secret header, reconciled into the store (as `warren setup` does)
    admin = await start_admin(
        [{"name": "from-file", "url": "http://127.0.0.1:9/f", "events": ["#"], "headers": HEADERS}]
    )
    service = await admin.api.app[SERVICE].get()
    await service.store.reconcile_file(admin.config.endpoints)
    # Then the store keeps no trace of its value (not even sealed), and the view shows ***
    options = await stored_options(admin, "from-file")
    assert options["headers"] == {"X-Team": "billing", "Authorization": {"secret": True}}
    read = await admin.call("GET", "/v1/endpoints/from-file")
    assert read.body["options"]["headers"] == SHOWN


async def test_a_tenants_key_sets_headers_but_not_the_egress_proxy(start_admin: Start) -> None:
    # Given a tenant's key (the portal's, a customer's backend)
    admin = await start_admin(delivery={"proxies": {"eu": "http://10.0.0.1:3128"}})
    key = (await new_key(admin, "acme"))["key"]
    # Then it creates and changes its endpoint's headers, and the views it reads hide the secret value
    created = await admin.call("POST", "/v1/endpoints", spec("acme-1", headers=HEADERS), token=key)
    assert created.status == 201 and created.body["options"]["headers"] == SHOWN, created.body
    # But picking, or turning off, the deployment's egress proxy is the operator's: 403 for a tenant's key
    for method, path, body in [
        ("POST", "/v1/endpoints", spec("acme-2", proxy="eu")),
        ("PATCH", "/v1/endpoints/acme-1", {"proxy": "direct"}),
    ]:
        refused = await admin.call(method, path, body, token=key)
        assert (refused.status, refused.body["error"]) == (403, "forbidden"), refused.body
        assert "egress proxy" in refused.body["message"]
    assert (await admin.call("PATCH", "/v1/endpoints/acme-1", {"proxy": "eu"})).status == 200  # an admin token may
