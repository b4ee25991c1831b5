"""The transport seam holds: the runner, its hooks and the health code import nothing HTTP."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(30)

NEUTRAL = [
    "warren.consumers.endpoint_runner",
    "warren.consumers.decision",
    "warren.consumers.settling",
    "warren.consumers.hooks",
    "warren.consumers.health.breaker",
    "warren.consumers.health.guard",
    "warren.consumers.health.control",
    "warren.consumers.health.state_sync",
]
HTTP = ("aiohttp", "warren.transport.http", "warren.transport.classify", "warren.transport.egress")


@pytest.mark.parametrize("module", NEUTRAL)
def test_module_imports_nothing_http(module: str) -> None:
    # A fresh interpreter, so that nothing imported by another test counts
    code = (
        f"import sys, {module}\n"
        f"print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'aiohttp' or m in {HTTP!r})))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert found == [], f"{module} pulls in {found}"
