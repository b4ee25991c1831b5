"""Fixtures: one fresh vhost per test run on a real RabbitMQ, a random name prefix per test, configs."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import gc
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from tests.support import bounded, exclusive
from tests.support.rabbit import AMQP_ENV, PLUGINS, RabbitServer, docker_available, from_environment
from warren.broker.management import ManagementClient
from warren.core.errors import ManagementError
from warren.topology.config import WarrenConfig

# A suite started in the background of a non-interactive shell (`scripts/test &` in a script, nohup) runs with
# SIGINT ignored, and every process it starts inherits that (an ignored signal stays ignored across exec; Python
# then installs no KeyboardInterrupt handler): the tests that press Ctrl-C on a child (status --watch, dlq
# replay, warren.loop's runner) would signal a process that cannot hear it, and fail as if it hung. Two whole
# loaded runs failed all of them that way. Here SIGINT is delivered as in a terminal, so children can hear it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

if sys.version_info < (3, 12):
    # CPython 3.11 keeps one AST recursion counter per interpreter and resets it at each ast.parse: a parse that
    # starts inside another (a garbage collection during pytest's parse runs a __del__ that logs a traceback,
    # which 3.11 formats with ast.parse) makes the outer one fail with "SystemError: AST constructor recursion
    # depth mismatch", and pytest turns that into an INTERNALERROR that ends the run. No collection during a
    # parse, no nested parse.
    _parse = ast.parse

    @functools.wraps(_parse)
    def _parse_without_collection(*args: Any, **kwargs: Any) -> Any:
        collecting = gc.isenabled()
        gc.disable()
        try:
            return _parse(*args, **kwargs)
        finally:
            if collecting:
                gc.enable()

    ast.parse = _parse_without_collection

TEST_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
# The store key of make_config's configurations: live apply seals announced secrets with it, workers open them.
TEST_STORE_KEY = "yNoS0mDUEt0Uc1ryk8rHQ3zT6cN0zYyMxGxKZ9n6bWo="

# Every fixture that reaches RabbitMQ depends on this one, so a test needs a broker exactly when it is among
# the fixtures the test uses (directly or through others).
BROKER_FIXTURE = "rabbit_server"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", exclusive.MARKER_HELP)
    config.addinivalue_line("markers", exclusive.ALONE_HELP)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``broker`` exactly the tests that use the broker, so that ``-m broker`` (and ``-m 'not broker'``)
    select by what a test does, not by what someone remembered to write. A hand-written ``broker`` mark on a
    test that uses no broker is an error."""
    for item in items:
        bounded.arm(item)
        uses_broker = BROKER_FIXTURE in getattr(item, "fixturenames", ())
        if uses_broker:
            item.add_marker(pytest.mark.broker)
        elif item.get_closest_marker("broker") is not None:
            raise pytest.UsageError(
                f"{item.nodeid} is marked broker but uses no broker fixture: the mark is applied by "
                "tests/conftest.py from the fixtures a test uses; remove it"
            )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """An async test runs under its own loop's time limit (tests/support/bounded.py)."""
    seconds = item.stash.get(bounded.LIMIT, None)
    if seconds is None:
        yield
        return
    test = item.obj  # type: ignore[attr-defined]
    item.obj = bounded.bounded(test, seconds)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        item.obj = test  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outside pytest-timeout: waiting for the lock is not the test's time
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test that restarts the broker runs alone among the xdist workers (tests/support/exclusive.py)."""
    with exclusive.test_access(item, uses_broker=BROKER_FIXTURE in getattr(item, "fixturenames", ())):
        yield


@pytest.fixture(scope="session")
def rabbit_server() -> Iterator[RabbitServer]:
    """The broker under test: $WARREN_TEST_AMQP_URL, else a container when Docker runs, else skip/fail."""
    server = from_environment()
    if server is not None:
        yield server
        return
    if docker_available():
        from testcontainers.rabbitmq import RabbitMqContainer

        container = RabbitMqContainer("rabbitmq:3.13-management")
        container.with_command(
            "bash -c 'rabbitmq-plugins enable --offline " + " ".join(PLUGINS) + " && rabbitmq-server'"
        )
        container.with_exposed_ports(5672, 15672)
        with container:
            host = container.get_container_host_ip()
            amqp = f"amqp://guest:guest@{host}:{container.get_exposed_port(5672)}/"
            mgmt = f"http://guest:guest@{host}:{container.get_exposed_port(15672)}"
            yield RabbitServer(amqp, mgmt)
        return
    message = f"no RabbitMQ for the tests: set {AMQP_ENV} (see README) or run Docker for testcontainers"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
async def vhost(rabbit_server: RabbitServer) -> AsyncIterator[str]:
    """A vhost made for this run and deleted after it, so runs never see each other's queues."""
    name = f"warren-test-{uuid.uuid4().hex[:10]}"
    async with ManagementClient(
        rabbit_server.management_base,
        rabbit_server.user,
        rabbit_server.password,
        name,
        timeout=300,  # creating or deleting a vhost with many quorum queues can take a minute on 3.10
    ) as api:
        try:
            await _create_vhost(api, name, rabbit_server.user)
            yield name
        finally:
            await api.delete_vhost(name)


async def _create_vhost(api: ManagementClient, name: str, user: str) -> None:
    """Create the vhost; a busy broker may drop the request after creating it, so check before failing."""
    for attempt in range(3):
        try:
            await api.create_vhost(name, user)
            return
        except ManagementError:
            if attempt == 2:
                raise
            await asyncio.sleep(1)
            if await api.vhost_exists():
                await api.create_vhost(name, user)  # idempotent: sets the permissions again
                return


@pytest.fixture(scope="session")
def amqp_url(rabbit_server: RabbitServer, vhost: str) -> str:
    return rabbit_server.amqp_url(vhost)


@pytest.fixture
async def prefix(amqp_url: str, rabbit_server: RabbitServer, vhost: str) -> AsyncIterator[str]:
    """A name prefix of this test's own, so tests sharing the run's vhost never collide.

    Every queue and exchange named with it is deleted after the test: quorum queues are heavy, and a run
    that left hundreds of them behind would slow the broker (and the vhost's deletion) for everything else.
    """
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    import aio_pika

    async with ManagementClient(
        rabbit_server.management_base, rabbit_server.user, rabbit_server.password, vhost
    ) as api:
        queues = [q["name"] for q in await api.queues() if q["name"].startswith(name + ".")]
        exchanges = [e["name"] for e in await api.exchanges() if e["name"].startswith(name + ".")]
    connection = await aio_pika.connect(amqp_url)
    try:
        for queue in queues:
            channel = await connection.channel()
            with contextlib.suppress(Exception):
                await channel.queue_delete(queue)
        for exchange in exchanges:
            channel = await connection.channel()
            with contextlib.suppress(Exception):
                await channel.exchange_delete(exchange)
    finally:
        await connection.close()


@pytest.fixture
async def management(rabbit_server: RabbitServer, vhost: str) -> AsyncIterator[ManagementClient]:
    async with ManagementClient(
        rabbit_server.management_base, rabbit_server.user, rabbit_server.password, vhost
    ) as api:
        yield api


@pytest.fixture
def make_config(rabbit_server: RabbitServer, amqp_url: str, prefix: str) -> Callable[..., WarrenConfig]:
    """Build a WarrenConfig for this test's vhost and prefix; keyword sections override the defaults."""

    def build(endpoints: list[dict[str, Any]] | None = None, **sections: Any) -> WarrenConfig:
        broker = {"url": amqp_url, "management_url": rabbit_server.management_url, "prefix": prefix}
        broker.update(sections.pop("broker", {}))
        delivery = {"allow_private_networks": True, **sections.pop("delivery", {})}
        retry = {"base": "100ms", "cap": "1s", "max_attempts": 5, **sections.pop("retry", {})}
        eps = [{"secret": TEST_SECRET, **e} for e in (endpoints or [])]
        sections.setdefault("store", {"keys": [TEST_STORE_KEY]})
        return WarrenConfig(broker=broker, delivery=delivery, retry=retry, endpoints=eps, **sections)

    return build
