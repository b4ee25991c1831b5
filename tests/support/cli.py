"""Running the real ``warren`` CLI in a child process, as a user would, without the caller's WARREN_* settings."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import signal
import subprocess
import sys
from typing import NamedTuple


class Run(NamedTuple):
    code: int
    out: str
    err: str


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any WARREN_* override, tables 200 columns wide, plus ``extra``."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("WARREN_")}
    return {**clean, "COLUMNS": "200", **(extra or {})}


async def spawn_warren(
    *args: str, output: int | None = asyncio.subprocess.PIPE, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """The CLI started in a child process and left running (stdout and stderr to ``output``), for a signal."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "warren", *args, stdout=output, stderr=output, env=clean_env(env)
    )


async def stacks_of_stuck(process: asyncio.subprocess.Process) -> str:
    """End a child started with ``PYTHONFAULTHANDLER=1`` that does not exit, and return what it wrote to stderr:
    SIGABRT makes faulthandler print every thread's stack there first."""
    process.send_signal(signal.SIGABRT)
    try:
        _, err = await asyncio.wait_for(process.communicate(), 10)
    except TimeoutError:
        process.kill()
        _, err = await process.communicate()
    return (err or b"").decode(errors="replace")


async def warren(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 40) -> Run:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "warren", *args, env=clean_env(env),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(stdin or b""), timeout)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


def warren_sync(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warren", *args], capture_output=True, text=True, timeout=timeout, env=clean_env(env)
    )


def hinted(text: str, marker: str) -> list[str]:
    """The ``warren`` command a hint prints on the line that says ``marker``: the first one in backticks there,
    else all that follows ``marker``; split as a shell would. AssertionError when there is none."""
    for line in text.splitlines():
        if marker in line:
            quoted = re.search(r"`(warren [^`]*)`", line)
            words = shlex.split(quoted.group(1) if quoted else line.split(marker, 1)[1])
            assert words[:1] == ["warren"], f"no warren command on the line of {marker!r}: {line}"
            return words
    raise AssertionError(f"no {marker!r} in:\n{text}")


async def run_hinted(words: list[str], timeout: float = 40) -> Run:
    """The hinted command run as printed (``warren`` being this Python's), in a child process."""
    assert words[0] == "warren", words
    return await warren(*words[1:], timeout=timeout)
