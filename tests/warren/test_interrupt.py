"""Ctrl-C ends a one-shot command within a bound, whatever a library does with the cancellation.

Each case runs ``warren.loop.run_interruptible`` in a child process (it installs a SIGINT handler, which only the
main thread of a process may do) and signals it as a terminal would.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
import time

import pytest

from tests.support.cli import clean_env

pytestmark = pytest.mark.timeout(60)

PRELUDE = """
import asyncio, sys
from warren.loop import run_interruptible

async def command():
    print("running", flush=True)
{body}

try:
    print("result", run_interruptible(command(), grace={grace}), flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""

# A command that never ends by itself and goes on whenever it is cancelled.
SWALLOWS_EVERY_CANCELLATION = """
while True:
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        print("swallowed", flush=True)
"""


async def _interrupt(body: str, *, grace: float, signals: int = 1) -> tuple[int, str, str, float]:
    """Start the command, SIGINT it ``signals`` times once it runs; its code, output and seconds to exit."""
    source = PRELUDE.format(body=textwrap.indent(textwrap.dedent(body), "    "), grace=grace)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", source, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env()
    )
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), 30) == b"running\n"
    started = time.monotonic()
    for _ in range(signals):
        process.send_signal(signal.SIGINT)
        await asyncio.sleep(0.1)
    try:
        out, err = await asyncio.wait_for(process.communicate(), 30)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError("the command did not exit within 30 s of SIGINT") from None
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode(), time.monotonic() - started


async def test_a_command_that_honours_the_cancellation_ends_at_once_after_its_cleanup() -> None:
    # Given a command that waits, and cleans up when cancelled
    code, out, err, took = await _interrupt(
        """
        try:
            await asyncio.sleep(60)
        finally:
            print("cleaned up", flush=True)
        """,
        grace=20,
    )
    # When Ctrl-C comes, Then its cleanup ran and it ended as interrupted, long before the grace
    assert code == 130 and "cleaned up" in out and "interrupted" in out, (out, err)
    assert took < 10, took
    assert "abandoned" not in err and "Traceback" not in err, err


async def test_a_command_that_loses_the_cancellation_is_abandoned_after_the_grace() -> None:
    # Given a command that swallows every cancellation (as aiormq did, waiting for a channel.close-ok that did not
    # come, and held `warren status --watch` past 15 s)
    code, out, err, took = await _interrupt(SWALLOWS_EVERY_CANCELLATION, grace=1.5)
    # When Ctrl-C comes once, Then it is abandoned once the grace has passed, not before, and says so
    assert code == 130 and "swallowed" in out and "interrupted" in out, (out, err)
    assert 1.4 <= took < 10, took
    assert "did not stop within 1.5s of Ctrl-C; abandoned" in err, err


async def test_a_second_ctrl_c_abandons_at_once() -> None:
    # Given the same command, and a grace far longer than the test
    code, out, err, took = await _interrupt(SWALLOWS_EVERY_CANCELLATION, grace=300, signals=2)
    # When Ctrl-C comes twice, Then the second ends it without waiting for the grace
    assert code == 130 and "interrupted" in out, (out, err)
    assert took < 10, took


async def test_without_ctrl_c_the_result_comes_back() -> None:
    # Given a command that finishes by itself (the signal comes only after it printed "running": none here)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PRELUDE.format(body="    return 42", grace=1),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    # Then its value comes back and the process exits 0
    assert process.returncode == 0, err
    assert out.decode().splitlines() == ["running", "result 42"]
