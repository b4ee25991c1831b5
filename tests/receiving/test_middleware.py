"""The aiohttp middleware and handler wrapper over a real server on 127.0.0.1: 401 with a JSON reason, 413."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from warren.receiving.middleware import verification_middleware, verified_handler
from warren.receiving.verifiers import HmacSha256Verifier, TokenVerifier

VERIFIER = HmacSha256Verifier((b"secret",), "X-Signature", "hex", "sha256=")


def signed(body: bytes, secret: bytes = b"secret") -> dict[str, str]:
    return {"X-Signature": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()}


async def echo(request: web.Request) -> web.Response:
    # The handler reads the body again: aiohttp hands back the bytes the middleware verified.
    return web.Response(body=await request.read())


@pytest.fixture
async def middleware_client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = web.Application(middlewares=[verification_middleware(VERIFIER, max_body=1024)])
    app.router.add_post("/hook", echo)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def test_a_verified_request_reaches_the_handler_with_its_body(
    middleware_client: TestClient[web.Request, web.Application],
) -> None:
    body = b'{"ok": true}'
    response = await middleware_client.post("/hook", data=body, headers=signed(body))
    assert response.status == 200
    assert await response.read() == body


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing_signature"),
        ({"X-Signature": "md5=abc"}, "malformed_signature"),
        (signed(b"other body"), "no_matching_signature"),
        (signed(b'{"ok": true}', b"wrong"), "no_matching_signature"),
    ],
)
async def test_rejections_are_401_with_a_json_reason(
    middleware_client: TestClient[web.Request, web.Application], headers: dict[str, str], reason: str
) -> None:
    response = await middleware_client.post("/hook", data=b'{"ok": true}', headers=headers)
    assert response.status == 401
    assert response.content_type == "application/json"
    payload = await response.json()
    assert payload["error"] == "unauthorized"
    assert payload["reason"] == reason
    assert payload["message"]


async def test_an_oversized_body_is_413_before_verification(
    middleware_client: TestClient[web.Request, web.Application],
) -> None:
    body = b"x" * 2048
    response = await middleware_client.post("/hook", data=body, headers=signed(body))
    assert response.status == 413
    assert (await response.json())["error"] == "payload_too_large"


async def test_an_oversized_chunked_body_without_length_is_413(
    middleware_client: TestClient[web.Request, web.Application],
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b"y" * 512

    response = await middleware_client.post("/hook", data=chunks(), headers=signed(b""))
    assert response.status == 413


async def test_the_handler_wrapper_verifies_one_route_only() -> None:
    token = TokenVerifier((b"tok",), "X-Token")

    async def accept(_: web.Request, body: bytes) -> web.Response:
        return web.json_response({"length": len(body)})

    app = web.Application()
    app.router.add_post("/guarded", verified_handler(token, accept))
    app.router.add_post("/open", echo)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        assert (await client.post("/guarded", data=b"abc", headers={"X-Token": "tok"})).status == 200
        denied = await client.post("/guarded", data=b"abc", headers={"X-Token": "nope"})
        assert denied.status == 401
        assert (await denied.json())["reason"] == "invalid_token"
        assert (await client.post("/open", data=b"abc")).status == 200
