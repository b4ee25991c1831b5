"""Tests that restart the broker run alone when the suite runs on several pytest-xdist workers at once.

Every broker test holds a shared lock while it runs; a test marked ``restarts_broker`` holds it exclusively, so
it starts once the broker tests running on the other workers have ended, and no broker test starts until it
ends. A gate in front of the lock keeps the exclusive holder from waiting forever behind shared holders that
keep coming: it holds the gate while it waits, and a shared holder passes the gate before taking its lock.
The workers of one run share the lock files in the run's base temporary directory. Without xdist nothing is
locked (one test runs at a time anyway).

``tests.support.rabbit.rabbitmqctl`` refuses to stop the broker in a test without the mark, so a new restart
test cannot silently break the tests running beside it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

MARK = "restarts_broker"
MARKER_HELP = f"{MARK}: stops and starts the broker under test; under pytest-xdist it runs with no other broker test"
ALONE = "alone_on_broker"
ALONE_HELP = (
    f"{ALONE}: reads node-wide figures (file handles, queue counts) that other tests change; under pytest-xdist "
    "it runs with no other broker test (it may not restart the broker)"
)

_current_is_exclusive = False


def restarts_allowed() -> bool:
    """Whether the running test may stop the broker (it carries the ``restarts_broker`` mark)."""
    return _current_is_exclusive


def lock_directory(config: pytest.Config) -> Path | None:
    """The directory the workers of this run share, or None when the run is not split across xdist workers."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "basetemp", None):
        return None
    return Path(config.option.basetemp).parent  # xdist gives each worker <the run's basetemp>/<worker id>


@contextlib.contextmanager
def broker_access(directory: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold the broker shared (any number of tests) or exclusive (this test alone) for the block."""
    with (directory / "broker.gate").open("a") as gate, (directory / "broker.lock").open("a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if exclusive:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the gate stays held: shared holders queue behind this test
        else:
            fcntl.flock(gate, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@contextlib.contextmanager
def test_access(item: pytest.Item, *, uses_broker: bool) -> Iterator[None]:
    """Around one test's whole run (setup, call, teardown): the broker lock it needs, if any."""
    global _current_is_exclusive
    restarts = item.get_closest_marker(MARK) is not None
    exclusive = restarts or item.get_closest_marker(ALONE) is not None
    directory = lock_directory(item.config)
    _current_is_exclusive = restarts
    try:
        if directory is None or not (uses_broker or exclusive):
            yield
        else:
            with broker_access(directory, exclusive=exclusive):
                yield
    finally:
        _current_is_exclusive = False
