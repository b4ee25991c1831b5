"""A small client for RabbitMQ's management HTTP API: what AMQP cannot tell or do (arguments of existing
objects, exact queue counts per consumer, vhosts, shovels).

On a cluster (``management_url`` as a list) any node answers for all of them: a node that refuses the
connection is skipped for the next one, and the one that answered is asked first from then on.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import aiohttp

from warren.core.errors import ManagementError
from warren.topology.config import BrokerSettings

__all__ = ["ManagementClient"]


def _q(part: str) -> str:
    return quote(part, safe="")


class ManagementClient:
    """``async with ManagementClient.from_settings(settings) as api: await api.queue("warren.ep.acme.q")``."""

    def __init__(
        self, base_url: str | Sequence[str], user: str, password: str, vhost: str, timeout: float = 10.0
    ) -> None:
        bases = [base_url] if isinstance(base_url, str) else list(base_url)
        self._bases = [base.rstrip("/") for base in bases]
        self.base_url = self._bases[0]
        self.vhost = vhost
        # A plain header: aiohttp >= 3.14 deprecates BasicAuth and the session's auth= parameter.
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._headers = {"Authorization": f"Basic {token}"}
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_settings(
        cls, settings: BrokerSettings, vhost: str | None = None, timeout: float = 10.0
    ) -> ManagementClient:
        user, password = settings.management_credentials()
        return cls(settings.management_bases(), user, password, vhost or settings.vhost, timeout)

    async def __aenter__(self) -> ManagementClient:
        self._session = aiohttp.ClientSession(headers=self._headers, timeout=self._timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, body: Any = None, *, allow_404: bool = False) -> Any:
        """One API call; JSON in and out. Raises ManagementError with the status and the API's reason."""
        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self._headers, timeout=self._timeout)
        order = [self.base_url, *(other for other in self._bases if other != self.base_url)]
        for tried, base in enumerate(order, 1):
            try:
                result = await self._request(base, method, path, body, allow_404)
            except aiohttp.ClientConnectorError as exc:  # nothing was sent: the next node can take it
                if tried == len(order):
                    raise ManagementError(f"management API at {base} unreachable: {exc}") from exc
                continue
            self.base_url = base
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def _request(self, base: str, method: str, path: str, body: Any, allow_404: bool) -> Any:
        assert self._session is not None
        url = f"{base}/api/{path}"
        try:
            async with self._session.request(method, url, json=body) as response:
                if response.status == 404 and allow_404:
                    return None
                text = await response.text()
                if response.status >= 400:
                    raise ManagementError(
                        f"management API {method} /api/{path}: HTTP {response.status} {text[:300]}",
                        response.status,
                    )
                return await response.json(content_type=None) if text else None
        except aiohttp.ClientConnectorError:
            raise
        except aiohttp.ClientError as exc:
            raise ManagementError(f"management API at {base} unreachable: {exc}") from exc
        except TimeoutError as exc:
            raise ManagementError(f"management API at {base} timed out") from exc

    # --- reading -------------------------------------------------------------------------------------
    async def overview(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", "overview")
        return result

    async def exchange_types(self) -> set[str]:
        return {t["name"] for t in (await self.overview()).get("exchange_types", [])}

    async def queues(self, stats: bool = True) -> list[dict[str, Any]]:
        """Every queue of the vhost. With ``stats``, with message counts (exact ones come from ``queue()``), and
        the list may lag a few seconds; without, no counts, read from the queue table itself, and much lighter."""
        if not stats:
            return await self.queue_table(f"queues/{_q(self.vhost)}")
        result: list[dict[str, Any]] = await self.request("GET", f"queues/{_q(self.vhost)}?disable_stats=false")
        return result

    async def queue_table(self, path: str = "queues", columns: str = "") -> list[dict[str, Any]]:
        """Queues without statistics (``path`` "queues" for every vhost), ``columns`` "a,b" to keep only those.

        RabbitMQ 3.10 answers 500 to this while a classic queue is being declared or deleted anywhere on the
        node (its record has no process yet); a few retries, then the list with statistics, which skips it.
        """
        keep = f"&columns={columns}" if columns else ""
        for attempt in range(3):
            try:
                result: list[dict[str, Any]] = await self.request("GET", f"{path}?disable_stats=true{keep}")
                return result
            except ManagementError as exc:
                if exc.status != 500:
                    raise
                await asyncio.sleep(0.2 * (attempt + 1))
        result = await self.request("GET", f"{path}?disable_stats=false{keep}")
        return result

    async def queue(self, name: str) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await self.request("GET", f"queues/{_q(self.vhost)}/{_q(name)}", allow_404=True)
        return result

    async def vhost_exists(self) -> bool:
        return await self.request("GET", f"vhosts/{_q(self.vhost)}", allow_404=True) is not None

    async def exchange(self, name: str) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await self.request(
            "GET", f"exchanges/{_q(self.vhost)}/{_q(name)}", allow_404=True
        )
        return result

    async def exchanges(self, stats: bool = True) -> list[dict[str, Any]]:
        """Every exchange of the vhost; without ``stats``, no message rates (lighter for thousands)."""
        flag = "" if stats else "?disable_stats=true"
        result: list[dict[str, Any]] = await self.request("GET", f"exchanges/{_q(self.vhost)}{flag}")
        return result

    async def bindings(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.request("GET", f"bindings/{_q(self.vhost)}")
        return result

    async def bindings_to_exchange(self, name: str) -> list[dict[str, Any]]:
        """The bindings whose destination is exchange ``name`` (empty when it does not exist)."""
        path = f"exchanges/{_q(self.vhost)}/{_q(name)}/bindings/destination"
        result: list[dict[str, Any]] | None = await self.request("GET", path, allow_404=True)
        return result or []

    async def consumers(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.request("GET", f"consumers/{_q(self.vhost)}")
        return result

    async def policies(self, kind: str = "policies") -> list[dict[str, Any]]:
        """The vhost's policies (``kind="operator-policies"`` for the operator's); [] when the API has none."""
        result: list[dict[str, Any]] | None = await self.request("GET", f"{kind}/{_q(self.vhost)}", allow_404=True)
        return result or []

    # --- policies -------------------------------------------------------------------------------------------
    async def put_policy(self, name: str, body: dict[str, Any]) -> None:
        await self.request("PUT", f"policies/{_q(self.vhost)}/{_q(name)}", body)

    async def delete_policy(self, name: str) -> None:
        await self.request("DELETE", f"policies/{_q(self.vhost)}/{_q(name)}", allow_404=True)

    # --- definitions ---------------------------------------------------------------------------------------
    async def import_definitions(self, document: dict[str, Any]) -> None:
        """Import a definitions document into this client's vhost (what the UI's "Import definitions" does)."""
        await self.request("POST", f"definitions/{_q(self.vhost)}", document)

    # --- vhosts, for tests and tooling ------------------------------------------------------------------
    async def create_vhost(self, vhost: str, user: str) -> None:
        await self.request("PUT", f"vhosts/{_q(vhost)}", {})
        await self.request(
            "PUT", f"permissions/{_q(vhost)}/{_q(user)}", {"configure": ".*", "write": ".*", "read": ".*"}
        )

    async def delete_vhost(self, vhost: str) -> None:
        await self.request("DELETE", f"vhosts/{_q(vhost)}", allow_404=True)

    # --- shovels ------------------------------------------------------------------------------------------
    async def put_shovel(self, name: str, value: dict[str, Any]) -> None:
        await self.request("PUT", f"parameters/shovel/{_q(self.vhost)}/{_q(name)}", {"value": value})

    async def shovel_status(self, name: str) -> dict[str, Any] | None:
        for shovel in await self.request("GET", f"shovels/{_q(self.vhost)}") or []:
            if shovel.get("name") == name:
                result: dict[str, Any] = shovel
                return result
        return None

    async def delete_shovel(self, name: str) -> None:
        await self.request("DELETE", f"parameters/shovel/{_q(self.vhost)}/{_q(name)}", allow_404=True)
