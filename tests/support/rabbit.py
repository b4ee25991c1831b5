"""The RabbitMQ a test run uses: the one named by the environment, else a testcontainers one, else none."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from tests.support import exclusive

AMQP_ENV = "WARREN_TEST_AMQP_URL"
MANAGEMENT_ENV = "WARREN_TEST_MANAGEMENT_URL"
RABBITMQCTL_ENV = "WARREN_TEST_RABBITMQCTL"  # the rabbitmqctl command of the broker under test
STOPPING = frozenset({"stop_app", "stop", "shutdown", "reset", "force_reset", "close_all_connections"})
PLUGINS = (
    "rabbitmq_management",
    "rabbitmq_consistent_hash_exchange",
    "rabbitmq_shovel",
    "rabbitmq_shovel_management",
    "rabbitmq_prometheus",
)


@dataclass(frozen=True)
class RabbitServer:
    """A broker: its AMQP URL without vhost, and its management URL with credentials."""

    amqp_base: str
    management_url: str

    def amqp_url(self, vhost: str) -> str:
        parts = urlsplit(self.amqp_base)
        return urlunsplit(parts._replace(path="/" + quote(vhost, safe="")))

    @property
    def user(self) -> str:
        return urlsplit(self.management_url).username or "guest"

    @property
    def password(self) -> str:
        return urlsplit(self.management_url).password or "guest"

    @property
    def management_base(self) -> str:
        """The management URL without its credentials (ManagementClient sends them in a header)."""
        parts = urlsplit(self.management_url)
        return f"{parts.scheme}://{parts.hostname}:{parts.port or 15672}"


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def from_environment() -> RabbitServer | None:
    amqp = os.environ.get(AMQP_ENV)
    if not amqp:
        return None
    management = os.environ.get(MANAGEMENT_ENV, "http://guest:guest@127.0.0.1:15672")
    return RabbitServer(amqp, management)


def rabbitmqctl_command() -> list[str] | None:
    """The ``rabbitmqctl`` that addresses the broker under test, or None (tests that need it skip).

    $WARREN_TEST_RABBITMQCTL when set (``off``: none; ``scripts/rabbitmq4 env`` prints the 4.x node's); otherwise
    the one on PATH, only when the broker under test is this machine's default node (AMQP port 5672): a test must never
    restart a node other than the one it tests.
    """
    configured = os.environ.get(RABBITMQCTL_ENV, "").strip()
    if configured.lower() == "off":
        return None  # a broker shared by runs going on at once: a restart would fail the others' tests
    if configured:
        return shlex.split(configured)
    amqp = os.environ.get(AMQP_ENV, "")
    parts = urlsplit(amqp)
    local_default = parts.hostname in ("127.0.0.1", "localhost", "::1") and (parts.port or 5672) == 5672
    found = shutil.which("rabbitmqctl")
    return [found] if amqp and local_default and found else None


async def rabbitmqctl(*args: str, timeout: float = 120) -> None:
    """Run ``rabbitmqctl ARGS`` against the broker under test (the caller skips when there is none)."""
    command = rabbitmqctl_command()
    assert command is not None, f"no rabbitmqctl for the broker under test: set {RABBITMQCTL_ENV}"
    if args and args[0] in STOPPING and not exclusive.restarts_allowed():
        raise AssertionError(
            f"rabbitmqctl {args[0]} in a test not marked @pytest.mark.{exclusive.MARK}: the tests running beside "
            "it (pytest-xdist) would lose their broker; mark it so that it runs alone"
        )
    # RabbitMQ 4.0.5 sometimes fails `start_app` after `stop_app` (its check of the deprecated
    # transient_nonexcl_queues feature finds the metadata store not ready: "Mnesia function failed 99 times");
    # the next try starts it (docs/rabbitmq4.md). Left stopped, every test after it would fail.
    tries = 3 if args[:1] == ("start_app",) else 1
    for attempt in range(tries):
        try:
            await asyncio.to_thread(subprocess.run, [*command, *args], check=True, capture_output=True, timeout=timeout)
            return
        except subprocess.CalledProcessError:
            if attempt + 1 == tries:
                raise
            await asyncio.sleep(1.0)
