"""The partition harness of scripts/partition: three nodes in network namespaces of their own, faults between them.

Every test here is marked ``partition`` and left out of the main suite (pyproject's addopts deselect it);
``.ci/run`` runs them after the cluster leg with ``-m partition``. Without the harness's environment they are
skipped, except under CI, where a missing harness is a failure.
"""

from __future__ import annotations

import os

import pytest

URLS_ENV = "WARREN_TEST_PARTITION_URLS"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/partition/" in item.nodeid.replace(os.sep, "/"):
            item.add_marker(pytest.mark.partition)


@pytest.fixture(scope="session")
def partition_harness() -> str:
    if not os.environ.get(URLS_ENV):
        message = f'no partition harness: run `scripts/partition up` and `eval "$(scripts/partition env)"` ({URLS_ENV})'
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return os.environ.get("WARREN_TEST_PARTITION_HANDLING", "pause_minority")
