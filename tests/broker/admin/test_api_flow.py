"""Endpoints as live data, end to end: the admin API of a real ``warren api`` (in this process, or a child process
where it is killed), real ``warren worker`` processes, real receivers on 127.0.0.1, real RabbitMQ, each store.

Events flow the whole time (tests/support/event_flow.py remembers when each publish started and whether RabbitMQ
routed it), so every test can say exactly which events an endpoint had to receive: those of its tenant and its
subscriptions published after the call that created it returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from tests.broker.admin.conftest import ADMIN_TOKEN
from tests.broker.ingest.conftest import TOKEN, ApiServer, Reply
from tests.conftest import TEST_STORE_KEY
from tests.support.dead_letters import drain
from tests.support.event_flow import Sent, TenantFlow
from tests.support.processes import ApiProcess, WorkerProcess, running_workers, write_config
from tests.support.receiver import Received, Receiver, always
from tests.support.store import store_postgres, store_url
from tests.support.topology import declare
from warren.broker.connection import connect
from warren.broker.queue_probe import QueueProbe
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.topics import topic_matches

__all__ = ["store_postgres", "store_url"]

# Endpoints per tenant in the 200-endpoint test (20 tenants): 10 on PostgreSQL (200 endpoints); fewer on SQLite,
# whose single writer and file sync make each create slower, so that both backends fit the suite's budget.
PER_TENANT = {"postgresql": 10, "sqlite": 3}
CREATES_AT_ONCE = 4  # concurrent create calls: a platform onboarding a batch of customers
# The bound for API call -> first delivery, for the median; the worst of 20 may take up to this on a
# machine shared by many test runs.
APPLY_LATENCY_LIMIT = 1.0
APPLY_LATENCY_WORST = 3.0


def backend(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgresql"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass
class Deployment:
    """A deployment's configuration (and its file, for processes) and the API answering admin calls."""

    config: WarrenConfig
    path: Path
    api: ApiServer

    async def call(self, method: str, path: str, body: Any = None) -> Reply:
        return await self.api.request(method, path, body, token=ADMIN_TOKEN)


def flow_config(make_config: Callable[..., WarrenConfig], store_url: str, **sections: Any) -> WarrenConfig:
    """No endpoint in the file: every endpoint of these tests is created through the API."""
    api = {"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN], **sections.pop("api", {})}
    store = {"url": store_url, "keys": [TEST_STORE_KEY], **sections.pop("store", {})}
    delivery = {"grace_period": "1s", **sections.pop("delivery", {})}
    return make_config([], api=api, store=store, delivery=delivery, **sections)


@pytest.fixture
def deploy(
    make_config: Callable[..., WarrenConfig],
    store_url: str,
    start_api: Callable[..., Awaitable[ApiServer]],
    tmp_path: Path,
) -> Callable[..., Awaitable[Deployment]]:
    """``await deploy(**sections)``: the topology declared, the file written, the API (real live apply) started."""

    async def start(**sections: Any) -> Deployment:
        config = flow_config(make_config, store_url, **sections)
        api = await start_api(config)  # declares the topology; no applier given: the real one, live
        return Deployment(config, write_config(tmp_path, config), api)

    return start


@pytest.fixture
async def receivers() -> AsyncIterator[Callable[[], Awaitable[Receiver]]]:
    """``await receiver()``: one more receiver on 127.0.0.1, stopped after the test."""
    async with contextlib.AsyncExitStack() as stack:

        async def make() -> Receiver:
            return await stack.enter_async_context(Receiver())

        yield make


def spec(receiver: Receiver, name: str, tenant: str, events: Sequence[str] = ("#",), **fields: Any) -> dict[str, Any]:
    return {"name": name, "tenant": tenant, "url": f"{receiver.url}/{name}", "events": list(events), **fields}


def owed(sent: Sequence[Sent], tenant: str, events: Sequence[str], since: float) -> set[str]:
    """The events an endpoint must get: its tenant's, of a type it subscribes to, published from ``since`` on."""
    return {
        s.id for s in sent if s.tenant == tenant and s.at >= since and any(topic_matches(p, s.type) for p in events)
    }


def allowed(sent: Sequence[Sent], tenant: str, events: Sequence[str]) -> set[str]:
    """The events an endpoint may get at all: its tenant's, of a type it subscribes to."""
    return {s.id for s in sent if s.tenant == tenant and any(topic_matches(p, s.type) for p in events)}


def ids_at(receiver: Receiver, name: str) -> list[str]:
    return [r.event_id for r in receiver.received if r.path.endswith(f"/{name}") and 200 <= r.status < 300]


async def queue_depth(config: WarrenConfig, queue: str) -> int | None:
    """Ready messages of ``queue`` at this instant (a passive declare), None when it does not exist."""
    connection = await connect(config.broker.urls)
    try:
        probe = QueueProbe(connection)
        found = await probe.depth(queue)
        await probe.close()
        return None if found is None else found.ready
    finally:
        await connection.close()


def ms(seconds: Sequence[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"median {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"
    )


@pytest.mark.alone_on_broker  # hundreds of quorum queues
@pytest.mark.timeout(600)  # 300 s seen for 200 endpoints under a load average of 24 on 2 cores
async def test_endpoints_created_through_the_api_while_events_flow_get_exactly_their_tenants_events(
    deploy: Callable[..., Awaitable[Deployment]],
    receivers: Callable[[], Awaitable[Receiver]],
    store_url: str,
) -> None:
    """20 tenants, each with endpoints created through the API while every tenant publishes: 200 endpoints on
    PostgreSQL, 60 on SQLite (PER_TENANT: the same test, fewer endpoints, to keep the suite within its budget).

    Endpoint ``e0`` of a tenant takes every event of the tenant, ``eN`` only ``flow.eN``: every tenant publishes
    the same types, so an event reaching another tenant's endpoint would be seen."""
    per_tenant = PER_TENANT[backend(store_url)]
    tenants = [f"t{i:02d}" for i in range(20)]
    types = [f"flow.e{j}" for j in range(per_tenant)]
    deployment = await deploy()
    inbox = {tenant: await receivers() for tenant in tenants}
    subscriptions = {f"{t}-e{j}": (t, ["#"] if j == 0 else [types[j]]) for j in range(per_tenant) for t in tenants}
    created: dict[str, float] = {}
    calls: list[float] = []
    gate = asyncio.Semaphore(CREATES_AT_ONCE)

    async def create(name: str) -> None:
        tenant, events = subscriptions[name]
        async with gate:
            started = time.monotonic()
            reply = await deployment.call("POST", "/v1/endpoints", spec(inbox[tenant], name, tenant, events))
            created[name] = time.monotonic()
        assert reply.status == 201, reply.body
        calls.append(created[name] - started)

    # Given two workers that know no endpoint, and every tenant publishing (nobody serves them yet)
    async with (
        running_workers(deployment.path, 2),
        TenantFlow(deployment.config, tenants, types, interval=0.1) as flow,
    ):
        # When the endpoints are created through the API, a few calls at a time, tenants interleaved
        began = time.monotonic()
        await asyncio.gather(*(create(name) for name in subscriptions))
        took = time.monotonic() - began
        # (and events keep flowing until every type was published for every tenant after the last create)
        await flow.rounds_after(len(types) + 1, timeout=60)
        await flow.stop()
        must = {name: owed(flow.sent, t, ev, created[name]) for name, (t, ev) in subscriptions.items()}

        def all_arrived(_: Receiver) -> bool:
            return all(must[n] <= set(ids_at(inbox[t], n)) for n, (t, _ev) in subscriptions.items())

        await inbox[tenants[0]].wait_for(all_arrived, timeout=120)
    print(
        f"\n{len(subscriptions)} endpoints created through the API ({backend(store_url)}, {CREATES_AT_ONCE} calls at "
        f"a time) in {took:.1f} s; create call: {ms(calls)}; {len(flow.sent)} events published"
    )
    # Then every endpoint got every event it was owed, exactly once, and nothing of another tenant or type
    for name, (tenant, events) in subscriptions.items():
        got = ids_at(inbox[tenant], name)
        assert len(got) == len(set(got)), f"{name}: duplicates"
        assert set(got) <= allowed(flow.sent, tenant, events), f"{name}: events it does not subscribe to"
        assert must[name] <= set(got), f"{name}: {len(must[name] - set(got))} owed events missing"
        assert must[name], f"{name}: no event was published for it after its create: the test proves nothing"
    # And each tenant's receiver was called for its own endpoints only
    for tenant, receiver in inbox.items():
        assert {r.path.rsplit("/", 1)[-1].split("-e")[0] for r in receiver.received} == {tenant}


def verifies(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    try:
        Webhook(secret).verify(body, headers)
    except WebhookVerificationError:
        return False
    return True


@pytest.mark.timeout(90)
async def test_a_secret_rotated_mid_flow_signs_every_delivery_verifiably(
    deploy: Callable[..., Awaitable[Deployment]],
    receivers: Callable[[], Awaitable[Receiver]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an endpoint delivering one event at a time (so signing order is arrival order) while events flow,
    # and the API's sweep for expired secrets running every 100 ms (30 s in production)
    monkeypatch.setattr("warren.broker.admin.app.SWEEP_INTERVAL", 0.1)
    deployment = await deploy()
    receiver = await receivers()
    created = await deployment.call("POST", "/v1/endpoints", spec(receiver, "rot", "rot", concurrency=1))
    assert created.status == 201, created.body
    old = created.body["secret"]
    async with running_workers(deployment.path, 1), TenantFlow(deployment.config, ["rot"], interval=0.02) as flow:
        await receiver.wait_for(lambda r: len(ids_at(r, "rot")) >= 20, timeout=15)
        # When its secret rotates with a 2 s grace period, events still flowing
        asked = time.monotonic()
        rotated = await deployment.call("POST", "/v1/endpoints/rot/rotate-secret", {"grace": 2})
        assert rotated.status == 200, rotated.body
        new = rotated.body["secret"]
        # Then, once the grace period is over, the API stops signing with the old one by itself
        revealed: list[str] = []
        deadline = time.monotonic() + 15
        while len(revealed) != 1:
            assert time.monotonic() < deadline, "the old secret still signs 15 s after a 2 s grace period"
            await asyncio.sleep(0.1)
            reply = await deployment.call("GET", "/v1/endpoints/rot/secret")
            revealed = [s["secret"] for s in reply.body["secrets"]]
        assert revealed == [new] and time.monotonic() - asked >= 1.95

        def new_only(r: Received) -> bool:
            return verifies(new, r.body, dict(r.headers)) and not verifies(old, r.body, dict(r.headers))

        await receiver.wait_for(lambda r: sum(map(new_only, r.received)) >= 20, timeout=15)
        await flow.stop()
        published = {s.id for s in flow.sent}
        await receiver.wait_for(lambda r: published <= r.ok_ids(), timeout=15)  # nothing lost on the way
    deliveries = receiver.received
    # Then every delivery verified with the old or the new secret: none failed
    failing = [r.event_id for r in deliveries if not any(verifies(s, r.body, dict(r.headers)) for s in (old, new))]
    assert not failing and len(deliveries) == len(published)
    # And the switch happened once, in order: old only, then both (the grace period), then the new one only
    phases = [
        "old" if not verifies(new, r.body, dict(r.headers)) else "new" if new_only(r) else "both" for r in deliveries
    ]
    collapsed = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    assert collapsed == ["old", "both", "new"], collapsed
    assert phases.count("both") >= 10, "too few deliveries in the grace period to show it"


@pytest.mark.timeout(90)
async def test_deleting_an_endpoint_mid_flow_loses_nothing(
    deploy: Callable[..., Awaitable[Deployment]],
    receivers: Callable[[], Awaitable[Receiver]],
) -> None:
    # Given an endpoint whose receiver is slow, so that messages wait in its queue, while events flow
    deployment = await deploy()
    config, prefix = deployment.config, deployment.config.broker.prefix
    receiver = await receivers()
    receiver.behaviour = always(200, delay=0.05)
    created = await deployment.call("POST", "/v1/endpoints", spec(receiver, "gone", "del", concurrency=2))
    assert created.status == 201, created.body
    async with running_workers(deployment.path, 1), TenantFlow(config, ["del"], interval=0.003) as flow:
        await receiver.wait_for(lambda r: len(r.received) >= 5, timeout=15)
        deadline = time.monotonic() + 10
        while (await queue_depth(config, names.work_queue(prefix, "gone")) or 0) < 20:
            assert time.monotonic() < deadline, "no backlog built up"
            await asyncio.sleep(0.05)
        # When it is deleted without force: refused, as documented, and it keeps delivering
        refused = await deployment.call("DELETE", "/v1/endpoints/gone")
        assert (refused.status, refused.body["error"]) == (409, "refused"), refused.body
        assert "holds messages" in refused.body["message"]
        assert (await deployment.call("GET", "/v1/endpoints/gone")).status == 200
        delivered = len(receiver.received)
        await receiver.wait_for(lambda r: len(r.received) > delivered + 3, timeout=10)
        # When it is deleted with force, events still flowing
        removing = time.monotonic()
        forced = await deployment.call("DELETE", "/v1/endpoints/gone?force=true")
        assert forced.status == 204, forced.body
        removed = time.monotonic()
        await flow.rounds_after(20)
        await flow.stop()
    # Then it is gone: from the API, its queue and its exchange
    assert (await deployment.call("GET", "/v1/endpoints/gone")).status == 404
    assert await queue_depth(config, names.work_queue(prefix, "gone")) is None
    # And what it held is in its DLQ, counted exactly (a passive declare), each message once
    dlq = names.dlq(prefix, "gone")
    in_dlq = await queue_depth(config, dlq)
    dead = [str(m.message_id) for m in await drain(config, dlq)]
    assert in_dlq == len(dead) == len(set(dead)) > 0, (in_dlq, len(dead))
    # And every event RabbitMQ routed to it was delivered or is in its DLQ, never both; the events published
    # after the removal were refused by RabbitMQ (counted for the tenant as unrouted), none before it
    routed = {s.id for s in flow.sent if s.routed}
    unrouted = [s for s in flow.sent if not s.routed]
    delivered_ids = receiver.ok_ids()
    assert routed == delivered_ids | set(dead) and not (delivered_ids & set(dead))
    assert unrouted and all(s.at >= removing for s in unrouted)
    assert not any(s.routed for s in flow.sent if s.at >= removed)


async def appears(config: WarrenConfig, name: str, what: str, call: asyncio.Task[int]) -> None:
    """Until the endpoint's exchange (``what`` "exchange") or work queue ("queue") exists, polled as fast as
    passive declares answer, or the call ended."""
    prefix = config.broker.prefix
    connection = await connect(config.broker.urls)
    try:
        probe = QueueProbe(connection)
        deadline = time.monotonic() + 30
        while not call.done() and time.monotonic() < deadline:
            if what == "exchange" and await probe.exchange_exists(names.endpoint_exchange(prefix, name)):
                break
            if what == "queue" and await probe.depth(names.work_queue(prefix, name)) is not None:
                break
        await probe.close()
    finally:
        await connection.close()


async def objects_of(config: WarrenConfig, name: str) -> dict[str, bool]:
    """Which of an endpoint's objects exist now: its exchange, its work queue, its DLQ."""
    prefix = config.broker.prefix
    connection = await connect(config.broker.urls)
    try:
        probe = QueueProbe(connection)
        found = {
            "exchange": await probe.exchange_exists(names.endpoint_exchange(prefix, name)),
            "queue": await probe.depth(names.work_queue(prefix, name)) is not None,
            "dlq": await probe.depth(names.dlq(prefix, name)) is not None,
        }
        await probe.close()
        return found
    finally:
        await connection.close()


@pytest.mark.timeout(360)  # four restarts of `warren api` and a worker: seconds each on a loaded machine
async def test_killing_a_worker_and_the_api_during_an_apply_converges_and_loses_nothing(
    make_config: Callable[..., WarrenConfig],
    store_url: str,
    receivers: Callable[[], Awaitable[Receiver]],
    tmp_path: Path,
) -> None:
    # Given `warren api` and two workers as processes, and events flowing for the tenants of the endpoints to come
    config = flow_config(make_config, store_url)
    await declare(config)
    path = write_config(tmp_path, config)
    receiver = await receivers()
    # When to kill, in the create call: as it is sent, once its exchange is declared (its queues maybe not, the
    # workers not told), once its queue is declared (the announce and the store write maybe not done)
    kills = ["sent", "exchange", "queue"]
    tenants = [f"k{i}" for i in range(len(kills))]
    api = await ApiProcess(path, free_port()).start()
    workers = [await WorkerProcess(path).start() for _ in range(2)]
    seen: list[str] = []
    converged: dict[str, float] = {}
    try:
        await api.wait_ready()
        for worker in workers:
            await worker.wait_ready(60)
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
            TenantFlow(config, tenants, interval=0.02) as flow,
        ):
            for index, (tenant, moment) in enumerate(zip(tenants, kills, strict=True)):
                name = f"killed-{index}"
                body = spec(receiver, name, tenant)

                async def create(api: ApiProcess = api, body: dict[str, Any] = body) -> int:
                    async with session.post(
                        api.url + "/v1/endpoints",
                        data=orjson.dumps(body),
                        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
                    ) as response:
                        await response.read()
                        return response.status

                # When the API and a worker are killed (SIGKILL) at that moment of a create call
                call = asyncio.create_task(create())
                if moment != "sent":
                    await appears(config, name, moment, call)
                api.kill()
                workers[0].kill()
                try:
                    first = await call
                except aiohttp.ClientError:
                    first = 0  # the API died with the call
                # Then what RabbitMQ holds of the endpoint is all of it or none of its queues (or re-appliable)
                seen.append(f"at {moment}: answer {first or 'none'}, objects {await objects_of(config, name)}")
                # And once both are back, the same call converges: created now, or created already
                await workers[0].cleanup()
                workers[0] = await WorkerProcess(path).start()
                await api.cleanup()
                api = await ApiProcess(path, api.port).start()
                await api.wait_ready()
                await workers[0].wait_ready(60)
                again = await create(api)
                # (409 endpoint_exists: the store has it, and it is stored only once applied)
                assert again in (201, 409) and (first != 201 or again == 409), (first, again)
                converged[name] = time.monotonic()
                assert all((await objects_of(config, name)).values())
                async with session.get(
                    f"{api.url}/v1/endpoints/{name}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
                ) as response:
                    assert response.status == 200
            await flow.rounds_after(10)
            await flow.stop()
            # Then no event was lost: every event RabbitMQ routed to an endpoint was delivered to it (the killed
            # worker's unacknowledged ones by another), among them every one published after its call converged
            must = {s.id for s in flow.sent if s.routed}
            for index, tenant in enumerate(tenants):
                after = owed(flow.sent, tenant, ["#"], converged[f"killed-{index}"])
                assert after and after <= must
            await receiver.wait_for(lambda r: must <= r.ok_ids(), timeout=60)
    finally:
        await api.cleanup()
        for worker in workers:
            await worker.cleanup()
    print("\nkilled during the create call:\n  " + "\n  ".join(seen))


@pytest.mark.timeout(150)
async def test_apply_latency_from_the_api_call_to_the_first_delivery(
    deploy: Callable[..., Awaitable[Deployment]],
    receivers: Callable[[], Awaitable[Receiver]],
    store_url: str,
) -> None:
    # Given two worker processes, and 20 tenants publishing every 20 ms with no endpoint yet
    deployment = await deploy()
    receiver = await receivers()
    tenants = [f"lat{i:02d}" for i in range(20)]
    latencies, calls = [], []
    async with running_workers(deployment.path, 2), TenantFlow(deployment.config, tenants, interval=0.02):
        for tenant in tenants:
            # When an endpoint for the tenant is created through the API
            started = time.monotonic()
            reply = await deployment.call("POST", "/v1/endpoints", spec(receiver, f"ep-{tenant}", tenant))
            calls.append(time.monotonic() - started)
            assert reply.status == 201, reply.body
            await receiver.wait_for(lambda r, t=tenant: bool(ids_at(r, f"ep-{t}")), timeout=10)
            first = next(r.at for r in receiver.received if r.path.endswith(f"/ep-{tenant}"))
            latencies.append(first - started)
    # Then the first event reaches it within a second of the call (the median; the worst within the bound)
    print(
        f"\napply latency, API call -> first delivery, {len(latencies)} creates ({backend(store_url)}): "
        f"{ms(latencies)}; the create call itself: {ms(calls)}"
    )
    assert statistics.median(latencies) < APPLY_LATENCY_LIMIT, latencies
    assert max(latencies) < APPLY_LATENCY_WORST, latencies
