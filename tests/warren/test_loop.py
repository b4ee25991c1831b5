"""The event loop of the long-running commands: uvloop when installed, asyncio's own when not, and said so."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import uvloop

from tests.support.cli import clean_env
from tests.support.processes import signal_child, write_config
from tests.support.topology import declare
from warren.loop import loop_factory, run_on_best_loop
from warren.topology.config import WarrenConfig

ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


async def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def _run_in_thread() -> asyncio.AbstractEventLoop:
    # A thread of its own: the runner sets and clears the thread's current loop, which must not touch the one
    # pytest-asyncio keeps for this session's async tests.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run_on_best_loop, _running_loop()).result(timeout=10)


def test_the_coroutine_runs_on_uvloop_and_the_log_says_so(caplog: pytest.LogCaptureFixture) -> None:
    # Given uvloop installed (a dependency on Linux)
    caplog.set_level(logging.INFO, logger="warren.loop")
    # When a coroutine runs through the helper
    loop = _run_in_thread()
    # Then it ran on uvloop's loop, and the one startup line names it
    assert isinstance(loop, uvloop.Loop)
    assert [(r.name, r.getMessage(), r.__dict__["event_loop"]) for r in caplog.records] == [
        ("warren.loop", "event loop uvloop", "uvloop")
    ]


def test_without_uvloop_it_falls_back_to_asyncio_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given uvloop cannot be imported (None in sys.modules makes `import uvloop` raise ImportError)
    monkeypatch.setitem(sys.modules, "uvloop", None)
    caplog.set_level(logging.INFO, logger="warren.loop")
    # When a coroutine runs through the helper
    loop = _run_in_thread()
    # Then there is no factory, it ran on asyncio's own loop, and the line says asyncio
    assert loop_factory() is None
    assert isinstance(loop, asyncio.BaseEventLoop) and not isinstance(loop, uvloop.Loop)
    assert [r.getMessage() for r in caplog.records] == ["event loop asyncio"]


def test_the_result_and_errors_come_back_as_with_asyncio_run() -> None:
    # Given coroutines that return and raise
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def broken() -> None:
        raise ValueError("boom")

    # When they run through the helper, Then the value and the exception come back unchanged
    assert run_on_best_loop(answer()) == 42
    with pytest.raises(ValueError, match="boom"):
        run_on_best_loop(broken())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _read(log: Path) -> str:
    return log.read_text(errors="replace")


async def _wait_for(log: Path, process: asyncio.subprocess.Process, *markers: str, timeout: float = 20) -> str:
    """The process's log once it holds every marker; fails early if the process ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = _read(log)
        if all(m in text for m in markers):
            return text
        if process.returncode is not None:
            break
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {markers} in {timeout}s:\n{_read(log)[-3000:]}")


async def _spawn(command: str, config: Path, log: Path) -> asyncio.subprocess.Process:
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "warren", command, "--config", str(config),
            stdout=out, stderr=out, cwd=ROOT, env=clean_env({"PYTHONUNBUFFERED": "1"}),
        )  # fmt: skip


@pytest.mark.timeout(90)
async def test_worker_api_receive_and_inbox_run_on_uvloop(
    make_config: Callable[..., WarrenConfig], tmp_path: Path
) -> None:
    # Given a declared topology with an endpoint, an API token and an inbound source
    config = make_config(
        [{"name": "acme", "url": "http://127.0.0.1:9/hook", "events": ["order.*"]}],
        api={"tokens": ["loop-token-0123456789abcdef"], "host": "127.0.0.1", "port": _free_port()},
        receiver={"host": "127.0.0.1", "port": 0},
        inbox={"store": f"sqlite:///{tmp_path / 'inbox.sqlite3'}"},
        inbound=[
            {
                "name": "partner",
                "verifier": "standard-webhooks",
                "secret": SECRET,
                "handler": "tests.support.inbox_handlers:record",
            }
        ],
    )
    await declare(config)
    path = write_config(tmp_path, config)
    ready = {
        "worker": "worker consuming",
        "api": "listening on http://",
        "receive": "listening on http://",
        "inbox": "warren inbox consuming",
    }
    # When each long-running command starts as an operator starts it
    processes: dict[str, tuple[asyncio.subprocess.Process, Path]] = {}
    try:
        for command in ready:
            log = tmp_path / f"{command}.log"
            processes[command] = (await _spawn(command, path, log), log)
        # Then each one logs, before it is ready, that it runs on uvloop (read from its running loop)
        for command, marker in ready.items():
            process, log = processes[command]
            text = await _wait_for(log, process, marker, "event loop uvloop")
            assert "event loop asyncio" not in text
            assert text.index("event loop uvloop") < text.index(marker), text
        # And each stops cleanly on SIGTERM, as on asyncio's loop
        for process, _ in processes.values():
            process.send_signal(signal.SIGTERM)
        codes = {c: await asyncio.wait_for(p.wait(), 20) for c, (p, _) in processes.items()}
        assert codes == dict.fromkeys(ready, 0), {c: _read(log)[-1500:] for c, (_, log) in processes.items()}
    finally:
        for process, _ in processes.values():
            signal_child(process)
            await process.wait()
