"""``warren receive`` and ``warren inbox`` as the user runs them: real processes, real RabbitMQ, SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import aio_pika
import aiohttp

from tests.support.declare import declare_plan
from tests.support.effects import create_effects_table
from warren.consumers.receiving.stores.sqlite import SqliteStore
from warren.consumers.signing import signature_header
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology
from warren.topology.secrets import SigningSecrets, WebhookSecret

ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("WARREN_")}
    return {**clean, "PYTHONUNBUFFERED": "1"}


def warren(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warren", *args], capture_output=True, text=True, timeout=30, env=_env(), cwd=ROOT
    )


def write_config(
    path: Path,
    *,
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/",
    prefix: str = "warren",
    store: str = "sqlite:///inbox.sqlite3",
    handler: str = "tests.support.inbox_handlers:record",
) -> Path:
    path.write_text(
        f"""
[broker]
url = "{amqp_url}"
prefix = "{prefix}"

[inbox]
store = "{store}"

[receiver]
port = 0

[[inbound]]
name = "partner"
verifier = "standard-webhooks"
secret = "{SECRET}"
handler = "{handler}"
""",
        encoding="utf-8",
    )
    return path


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    # A command that got as far as its event loop has logged which loop it runs on; the error is the one other line.
    lines = [line for line in result.stderr.strip().splitlines() if " INFO warren.loop: " not in line]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_without_inbound_sources_both_commands_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "warren.toml"
    config.write_text("[broker]\nprefix = 'w'\n", encoding="utf-8")
    for command in ("receive", "inbox"):
        assert "no [[inbound]] sources" in one_line_error(warren(command, "--config", str(config)), 2)


def test_inbox_with_an_unknown_source_or_an_unimportable_handler_exits_2(tmp_path: Path) -> None:
    config = write_config(tmp_path / "warren.toml")
    assert "no inbound source named nope" in one_line_error(
        warren("inbox", "--config", str(config), "--sources", "nope"), 2
    )
    broken = write_config(tmp_path / "broken.toml", handler="no_such_module_xyz:handle")
    line = one_line_error(warren("inbox", "--config", str(broken)), 2)
    assert "partner" in line and "no_such_module_xyz" in line


def test_inbox_without_its_queue_exits_1_with_one_line(tmp_path: Path, amqp_url: str, prefix: str) -> None:
    config = write_config(
        tmp_path / "warren.toml", amqp_url=amqp_url, prefix=prefix, store=f"sqlite:///{tmp_path / 'inbox.sqlite3'}"
    )
    line = one_line_error(warren("inbox", "--config", str(config)), 1)
    assert f"{prefix}.in.partner" in line and "does not exist" in line


async def _read_until(stream: asyncio.StreamReader, marker: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        line = await asyncio.wait_for(stream.readline(), max(0.1, deadline - time.monotonic()))
        if not line:
            raise AssertionError(f"process ended before printing {marker!r}")
        text = line.decode()
        if marker in text:
            return text


async def test_receive_and_inbox_processes_turn_ten_posts_into_one_effect(
    tmp_path: Path, make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str
) -> None:
    # Given the topology, an effects table, and the two commands running as processes
    database = tmp_path / "inbox.sqlite3"
    config_file = write_config(
        tmp_path / "warren.toml", amqp_url=amqp_url, prefix=prefix, store=f"sqlite:///{database}"
    )
    config = make_config(
        inbound=[{"name": "partner", "verifier": "standard-webhooks", "secret": SECRET, "handler": "m:f"}]
    )
    connection = await aio_pika.connect_robust(amqp_url)
    await declare_plan(connection, plan_topology(config))
    await connection.close()
    store = SqliteStore(database)
    await store.open()
    await create_effects_table(store)
    await store.close()
    spawn = [sys.executable, "-m", "warren"]
    inbox = await asyncio.create_subprocess_exec(
        *spawn,
        "inbox",
        "--config",
        str(config_file),
        cwd=ROOT,
        env=_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    receive = await asyncio.create_subprocess_exec(
        *spawn,
        "receive",
        "--config",
        str(config_file),
        cwd=ROOT,
        env=_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert inbox.stdout is not None and receive.stdout is not None
        await _read_until(inbox.stdout, "warren inbox consuming partner")
        listening = await _read_until(receive.stdout, "listening on http://")
        url = listening.split("listening on ")[1].split()[0] + "/in/partner"
        # When a partner POSTs the same signed event ten times
        body = b'{"id": "msg_cli", "type": "invoice.paid", "data": {}}'
        now = int(time.time())
        headers = {
            "webhook-id": "msg_cli",
            "webhook-timestamp": str(now),
            "webhook-signature": signature_header(SigningSecrets((WebhookSecret(SECRET),)), "msg_cli", now, body),
            "Content-Type": "application/json",
        }
        async with aiohttp.ClientSession() as session:
            statuses = []
            for _ in range(10):
                async with session.post(url, data=body, headers=headers) as response:
                    statuses.append(response.status)
            async with session.post(url, data=body, headers={**headers, "webhook-signature": "v1,AAAA"}) as response:
                forged = response.status
        assert statuses == [202] * 10
        assert forged == 401
        # Then the inbox reports nine duplicates (its log says so for each one it drops)
        assert inbox.stderr is not None
        for _ in range(9):
            await _read_until(inbox.stderr, "event msg_cli duplicate")
        # And the handler's effect is there exactly once
        with sqlite3.connect(database) as db:
            rows = db.execute("SELECT event_id FROM effects").fetchall()
        assert rows == [("msg_cli",)]
    finally:
        # And both stop cleanly on SIGTERM
        for process in (receive, inbox):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        codes = [await asyncio.wait_for(p.wait(), 15) for p in (receive, inbox)]
    assert codes == [0, 0]
