"""The HTTP transport: sign and POST the envelope, and describe whatever happens as a SendResult.

Everything HTTP lives here: the aiohttp session, the Standard Webhooks headers, the egress guard
(warren/transport/egress.py) and the bounds on what is read of a response. aiohttp's exceptions are mapped to
short error texts here and nowhere else; an exception this module does not expect reaches the runner,
which counts it as a failed attempt. Once a status has arrived nothing can do that: its headers are parsed by
functions that never raise (``Retry-After``, warren/transport/retry_after.py) and a body that cannot be read is noted
in the excerpt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import aiohttp

from warren.core.redact import redact_urls
from warren.topology.config import Endpoint
from warren.tracing.carry import outgoing_headers
from warren.transport.base import Delivery, Outcome, SendResult, failed_result
from warren.transport.classify import classify, parse_retry_after
from warren.transport.egress import ForbiddenAddress, GuardedConnector, check_url_literal
from warren.transport.signing import signature_header

__all__ = ["KEPT_HEADERS", "HttpTransport", "http_result", "kept_headers", "new_session", "webhook_headers"]

# The response headers an attempt's record keeps beside the body's start, and how much of each value.
KEPT_HEADERS = ("content-type", "retry-after")
HEADER_CHARS = 200


def new_session(allow_private_networks: bool, user_agent: str) -> aiohttp.ClientSession:
    """The one shared session: keep-alive, no global connection cap (each endpoint's concurrency bounds it)."""
    connector_type = aiohttp.TCPConnector if allow_private_networks else GuardedConnector
    connector = connector_type(limit=0, limit_per_host=0, keepalive_timeout=30, ttl_dns_cache=60)
    # Responses are read only for the attempt log, so ask for them uncompressed. Setting the header (rather
    # than skip_auto_headers) keeps aiohttp on its fast path for every request.
    return aiohttp.ClientSession(
        connector=connector,
        headers={"User-Agent": user_agent, "Accept-Encoding": "identity"},
        auto_decompress=False,
    )


def webhook_headers(endpoint: Endpoint, delivery: Delivery, timestamp: int) -> dict[str, str]:
    """The Standard Webhooks request headers of one attempt, signed with every secret of the endpoint that signs
    now (a rotated-out one until the end of its grace, checked here, where the signing happens)."""
    signing = endpoint.secret.signing(time.time())
    return {
        "content-type": "application/json",
        "webhook-id": delivery.event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(signing, delivery.event_id, timestamp, delivery.body),
    }


def http_result(
    status: int | None,
    error: str | None,
    duration: float,
    *,
    retry_after: str | None = None,
    excerpt: str = "",
    response_headers: tuple[tuple[str, str], ...] = (),
    retry_statuses: frozenset[int] | tuple[int, ...] = (),
) -> SendResult:
    """An HTTP answer (or the lack of one) as a transport-neutral result: classified, Retry-After parsed once.

    An error text never carries the URL's credentials: aiohttp's messages quote the URL, so it is redacted here,
    where every error result is made."""
    if error is not None:
        error = redact_urls(error)
    verdict = classify(status, error, retry_statuses)
    return SendResult(
        verdict.outcome,
        verdict.reason,
        status=status,
        error=error,
        duration=duration,
        retry_after=parse_retry_after(retry_after),
        answer=f"HTTP {status}" if status is not None else None,
        excerpt=excerpt,
        response_headers=response_headers,
        throttled=status == 429,
    )


def kept_headers(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The answer's headers the attempt log keeps (``KEPT_HEADERS``, lowercase names), each value cut to
    ``HEADER_CHARS`` characters: what a customer debugging a failure needs besides the body."""
    return tuple((name, headers[name][:HEADER_CHARS]) for name in KEPT_HEADERS if name in headers)


def _refused(error: str, duration: float) -> SendResult:
    # Retrying cannot help until the configuration changes: dead-letter with the reason (credentials redacted).
    error = redact_urls(error)
    return SendResult(Outcome.DEAD, error, error=error, duration=duration, refused=True)


class HttpTransport:
    """POSTs signed envelopes; knows nothing about RabbitMQ or retries."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        allow_private_networks: bool,
        body_limit: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._session = session
        self._allow_private = allow_private_networks
        self._body_limit = body_limit
        self._clock = clock  # the wall clock of the webhook-timestamp header
        self._timeouts: dict[tuple[float, float], aiohttp.ClientTimeout] = {}

    async def send(self, endpoint: Endpoint, delivery: Delivery) -> SendResult:
        headers = webhook_headers(endpoint, delivery, int(self._clock()))
        outgoing_headers(headers, delivery.trace)
        return await self.post(
            endpoint.url,
            delivery.body,
            headers,
            timeout=endpoint.timeout,
            connect_timeout=endpoint.connect_timeout,
            retry_statuses=frozenset(endpoint.retry_statuses),
        )

    def _timeout(self, timeout: float, connect_timeout: float) -> aiohttp.ClientTimeout:
        client_timeout = self._timeouts.get((timeout, connect_timeout))
        if client_timeout is None:
            client_timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
            self._timeouts[(timeout, connect_timeout)] = client_timeout
        return client_timeout

    async def _excerpt(self, response: aiohttp.ClientResponse) -> str:
        """The start of the answer's body, at most ``body_limit`` bytes, as text.

        The status has arrived by now and stands whatever happens to the body: a connection reset half-way, a
        broken chunk, the total timeout. The excerpt is only for the attempt log, so a read that fails in any
        way is noted there instead (catching every Exception is deliberate: none of them may turn an answered
        attempt into a failed one; a cancellation still goes through)."""
        if not self._body_limit:
            return ""
        try:
            data = await response.content.read(self._body_limit)
        except Exception as exc:
            return f"[the body could not be read: {redact_urls(failed_result(exc).reason)}]"
        return data.decode("utf-8", "replace")

    async def post(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        *,
        timeout: float,
        connect_timeout: float,
        retry_statuses: frozenset[int] = frozenset(),
    ) -> SendResult:
        """One POST, redirects not followed, at most ``body_limit`` bytes of the answer read."""
        started = time.monotonic()
        try:
            if not self._allow_private:
                check_url_literal(url)
            async with self._session.post(
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=self._timeout(timeout, connect_timeout),
            ) as response:
                return http_result(
                    response.status,
                    None,
                    time.monotonic() - started,
                    retry_after=response.headers.get("Retry-After"),
                    excerpt=await self._excerpt(response),
                    response_headers=kept_headers(response.headers),
                    retry_statuses=retry_statuses,
                )
        except ForbiddenAddress as exc:
            return _refused(f"refused: {exc}", time.monotonic() - started)
        except aiohttp.InvalidURL as exc:
            # e.g. "http://127.1/": yarl refuses non-canonical IPv4 forms. Retrying cannot help either.
            return _refused(f"refused: invalid URL {exc}", time.monotonic() - started)
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, ForbiddenAddress):
                return _refused(f"refused: {exc.os_error}", time.monotonic() - started)
            return http_result(None, f"connection failed: {exc.os_error or exc}", time.monotonic() - started)
        except TimeoutError:
            return http_result(None, f"timed out after {timeout:g}s", time.monotonic() - started)
        except aiohttp.ClientError as exc:
            return http_result(None, f"{type(exc).__name__}: {exc}", time.monotonic() - started)
