"""`warren api` as an operator runs it: a subprocess, real RabbitMQ, SIGTERM to stop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp

from tests.support.processes import signal_child, write_config
from tests.support.topology import declare
from warren.topology.config import WarrenConfig

TOKEN = "cli-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("WARREN_")} | {"COLUMNS": "200"}


async def _run(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "warren",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=_env(),
    )
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_refuses_to_start_without_tokens(make_config: Callable[..., WarrenConfig], tmp_path: Path) -> None:
    path = write_config(tmp_path, make_config())
    code, out = await _run("api", "--config", str(path))
    assert code == 2
    assert "api.tokens is empty" in out and "Traceback" not in out


async def test_serves_until_sigterm_then_exits_cleanly(
    make_config: Callable[..., WarrenConfig], tmp_path: Path
) -> None:
    # Given a configuration with a token and an endpoint subscribed to order.*
    config = make_config(
        [{"name": "acme", "url": "http://127.0.0.1:9/hook", "events": ["order.*"]}], api={"tokens": [TOKEN]}
    )
    await declare(config)
    path = write_config(tmp_path, config)
    port = free_port()
    # When `warren api --port` runs
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "warren",
        "api",
        "--config",
        str(path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=_env(),
    )
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            await _wait_ready(session, f"http://127.0.0.1:{port}/readyz", process)
            # Then it accepts an event with the token
            async with session.post(
                f"http://127.0.0.1:{port}/v1/events",
                json={"type": "order.created", "data": {"n": 1}},
                headers={"Authorization": f"Bearer {TOKEN}"},
            ) as response:
                assert response.status == 202
        # And SIGTERM stops it with exit code 0 within the grace period
        process.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(process.communicate(), 15)
        assert process.returncode == 0, out.decode()
        assert f"listening on http://127.0.0.1:{port}" in out.decode()
    finally:
        signal_child(process)
        await process.wait()


async def _wait_ready(session: aiohttp.ClientSession, url: str, process: asyncio.subprocess.Process) -> None:
    deadline = asyncio.get_running_loop().time() + 15
    while asyncio.get_running_loop().time() < deadline:
        if process.returncode is not None:
            raise AssertionError("warren api exited early")
        try:
            async with session.get(url) as response:
                if response.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("warren api not ready in 15s")


async def test_a_taken_port_is_one_line_and_exit_1(make_config: Callable[..., WarrenConfig], tmp_path: Path) -> None:
    path = write_config(tmp_path, make_config(api={"tokens": [TOKEN]}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out = await _run("api", "--config", str(path), "--port", str(port))
    assert code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in out and "Traceback" not in out
