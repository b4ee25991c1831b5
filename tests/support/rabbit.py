"""The RabbitMQ a test run uses: the one named by the environment, else a testcontainers one, else none."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

AMQP_ENV = "WARREN_TEST_AMQP_URL"
MANAGEMENT_ENV = "WARREN_TEST_MANAGEMENT_URL"
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
