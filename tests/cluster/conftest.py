"""The three-node cluster of scripts/cluster: its URLs from ``scripts/cluster env``, a vhost per run.

Every test here is marked ``cluster`` and left out of the main suite (pyproject's addopts deselect it);
``.ci/run`` runs them after the main legs with ``-m cluster``. Without the cluster's environment they are
skipped, except under CI, where a missing cluster is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

from warren.broker.management import ManagementClient

URLS_ENV = "WARREN_TEST_CLUSTER_URLS"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/cluster/" in item.nodeid.replace(os.sep, "/"):
            item.add_marker(pytest.mark.cluster)


@dataclass(frozen=True)
class Cluster:
    urls: list[str]
    management: list[str]
    script: str

    def in_vhost(self, vhost: str) -> list[str]:
        return [urlunsplit((*urlsplit(url)[:2], "/" + quote(vhost, safe=""), "", "")) for url in self.urls]

    def bases(self) -> list[str]:
        return [f"http://{urlsplit(url).hostname}:{urlsplit(url).port}" for url in self.management]

    def node_of_port(self, port: int) -> int:
        return [urlsplit(url).port for url in self.urls].index(port) + 1

    def ctl(self, *args: str) -> None:
        subprocess.run([self.script, *args], check=True, capture_output=True, timeout=180)


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    urls = os.environ.get(URLS_ENV)
    if not urls:
        message = f'no RabbitMQ cluster: run `scripts/cluster up` and `eval "$(scripts/cluster env)"` ({URLS_ENV})'
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return Cluster(
        json.loads(urls),
        json.loads(os.environ["WARREN_TEST_CLUSTER_MANAGEMENT_URLS"]),
        os.environ.get("WARREN_TEST_CLUSTER_SCRIPT", "scripts/cluster"),
    )


@pytest.fixture
async def cluster_vhost(cluster: Cluster) -> AsyncIterator[str]:
    name = f"warren-ctest-{uuid.uuid4().hex[:8]}"
    async with ManagementClient(cluster.bases(), "guest", "guest", name, timeout=300) as api:
        await api.create_vhost(name, "guest")
        try:
            yield name
        finally:
            await api.delete_vhost(name)
