"""Header bytes that are not UTF-8 on ``warren api``: a 401 or a 422, never a 500 with a traceback."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest

from tests.api.ingest.conftest import TOKEN, ApiServer
from tests.support.raw_http import raw_exchange, status_of
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(30)


def _post(headers: bytes, body: bytes = b'{"type": "order.paid", "data": {}}') -> bytes:
    content_type = b"" if b"Content-Type" in headers else b"Content-Type: application/json\r\n"
    return (
        b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + content_type
        + b"Content-Length: %d\r\n" % len(body)
        + headers
        + b"Connection: close\r\n\r\n"
        + body
    )


@pytest.mark.parametrize("expect", [b"", b"Expect: 100-continue\r\n"], ids=["plain", "expect-100"])
@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (b"Authorization: Bearer \xff\xfe\r\n", 401),
        (b"Authorization: \xff\xfe " + TOKEN.encode() + b"\r\n", 401),
        (b"Authorization: Bearer " + TOKEN.encode() + b"\xff\r\n", 401),
        (b"Authorization: Bearer " + TOKEN.encode() + b"\r\nIdempotency-Key: k\xff\xfe\r\n", 422),
        # echoed in the error message: the JSON answer must still be written
        (b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Type: \xff/json\r\n", 415),
    ],
    ids=["token", "scheme", "token-suffix", "idempotency-key", "content-type"],
)
async def test_non_utf8_header_bytes_are_refused_without_a_traceback(
    api_config: Callable[..., WarrenConfig],
    start_api: Callable[..., Awaitable[ApiServer]],
    caplog: pytest.LogCaptureFixture,
    headers: bytes,
    status: int,
    expect: bytes,
) -> None:
    # Given the API running
    api = await start_api(api_config())
    port = int(api.url.rsplit(":", 1)[1])
    caplog.set_level(logging.WARNING)
    # When a request carries header bytes that are not UTF-8 (with and without Expect: 100-continue)
    response = await raw_exchange(port, _post(headers + expect))
    # Then the answer is the refusal for a wrong header, and nothing was logged as an error
    assert status_of(response) == status, response
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
