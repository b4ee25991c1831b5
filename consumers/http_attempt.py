"""One HTTP attempt: POST the signed envelope, and map whatever happens to an AttemptResult.

aiohttp's exceptions are mapped to short error texts here and nowhere else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import aiohttp

from warren.consumers.egress import ForbiddenAddress, GuardedConnector, check_url_literal
from warren.topology.redact import redact_urls

__all__ = ["AttemptResult", "HttpSender", "new_session"]


@dataclass(frozen=True)
class AttemptResult:
    """What one POST gave: a status, or an error text when no response came."""

    status: int | None
    error: str | None
    duration: float  # seconds
    retry_after: str | None = None
    response_excerpt: str = ""
    forbidden: bool = False  # refused by the egress guard: retrying cannot help

    @property
    def status_code(self) -> int:
        """The status, or 0 when there was no response (for headers and metrics)."""
        return self.status or 0


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


class HttpSender:
    """POSTs bodies; knows nothing about RabbitMQ or retries."""

    def __init__(self, session: aiohttp.ClientSession, *, allow_private_networks: bool, body_limit: int) -> None:
        self._session = session
        self._allow_private = allow_private_networks
        self._body_limit = body_limit
        self._timeouts: dict[tuple[float, float], aiohttp.ClientTimeout] = {}

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], *, timeout: float, connect_timeout: float
    ) -> AttemptResult:
        """POST once; an error text never carries the URL's credentials (aiohttp's messages quote the URL)."""
        result = await self._post(url, body, headers, timeout=timeout, connect_timeout=connect_timeout)
        return result if result.error is None else replace(result, error=redact_urls(result.error))

    async def _post(
        self, url: str, body: bytes, headers: dict[str, str], *, timeout: float, connect_timeout: float
    ) -> AttemptResult:
        started = time.monotonic()
        client_timeout = self._timeouts.get((timeout, connect_timeout))
        if client_timeout is None:
            client_timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
            self._timeouts[(timeout, connect_timeout)] = client_timeout
        try:
            if not self._allow_private:
                check_url_literal(url)
            async with self._session.post(
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=client_timeout,
            ) as response:
                excerpt = b""
                if self._body_limit:
                    excerpt = await response.content.read(self._body_limit)
                return AttemptResult(
                    response.status,
                    None,
                    time.monotonic() - started,
                    response.headers.get("Retry-After"),
                    excerpt.decode("utf-8", "replace"),
                )
        except ForbiddenAddress as exc:
            return AttemptResult(None, f"refused: {exc}", time.monotonic() - started, forbidden=True)
        except aiohttp.InvalidURL as exc:
            # e.g. "http://127.1/": yarl refuses non-canonical IPv4 forms. Retrying cannot help either.
            return AttemptResult(None, f"refused: invalid URL {exc}", time.monotonic() - started, forbidden=True)
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, ForbiddenAddress):
                return AttemptResult(None, f"refused: {exc.os_error}", time.monotonic() - started, forbidden=True)
            return AttemptResult(None, f"connection failed: {exc.os_error or exc}", time.monotonic() - started)
        except TimeoutError:
            return AttemptResult(None, f"timed out after {timeout:g}s", time.monotonic() - started)
        except aiohttp.ClientError as exc:
            return AttemptResult(None, f"{type(exc).__name__}: {exc}", time.monotonic() - started)
