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
from tests.support.processes import signal_child
from warren.receiving.identity import Identity
from warren.receiving.messages import encode_inbound
from warren.receiving.stores.sqlite import SqliteStore
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology
from warren.topology.secrets import SigningSecrets, WebhookSecret
from warren.transport.signing import signature_header

ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
WARREN_COMMAND = str(Path(sys.executable).parent / "warren")  # the console script pip installed beside Python


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
            signal_child(process, signal.SIGTERM)
        codes = [await asyncio.wait_for(p.wait(), 15) for p in (receive, inbox)]
    assert codes == [0, 0]


# A user's handler module beside their configuration, and a helper it imports only when an event comes.
HANDLER_MODULE = """
from pathlib import Path


def on_event(event, tx):
    import handler_notes  # a neighbour, imported when the handler runs

    Path("handled.txt").write_text(handler_notes.NOTE + event.id)
"""


async def test_inbox_imports_a_handler_from_the_directory_it_runs_in(
    tmp_path: Path, make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str
) -> None:
    # Given a handler module in the working directory only (not on PYTHONPATH), and its inbound queue
    app = tmp_path / "app"
    app.mkdir()
    (app / "user_hooks.py").write_text(HANDLER_MODULE, encoding="utf-8")
    (app / "handler_notes.py").write_text('NOTE = "handled "\n', encoding="utf-8")
    write_config(
        app / "warren.toml", amqp_url=amqp_url, prefix=prefix, store="sqlite:///inbox.sqlite3",
        handler="user_hooks:on_event",
    )  # fmt: skip
    config = make_config(inbound=[{"name": "partner", "verifier": "none", "id_field": "id", "handler": "m:f"}])
    connection = await aio_pika.connect_robust(amqp_url)
    try:
        await declare_plan(connection, plan_topology(config))
        channel = await connection.channel()
        message = encode_inbound("partner", Identity("evt_cwd"), b'{"id": "evt_cwd"}', {}, "application/json")
        await channel.default_exchange.publish(message, routing_key=names.inbound_queue(prefix, "partner"))
    finally:
        await connection.close()
    # When `warren inbox` runs as a user runs it (the installed command: its sys.path starts with its own
    # directory, where `python -m warren` would have put the working directory) from that directory
    inbox = await asyncio.create_subprocess_exec(
        WARREN_COMMAND, "inbox", "--config", "warren.toml", cwd=app, env=_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        # Then it imports the handler and calls it, neighbour included
        deadline = time.monotonic() + 30
        while not (app / "handled.txt").exists() and inbox.returncode is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if not (app / "handled.txt").exists():
            signal_child(inbox, signal.SIGTERM)
            _, err = await asyncio.wait_for(inbox.communicate(), 15)
            raise AssertionError(f"the handler was not called; warren inbox said:\n{err.decode()}")
        assert (app / "handled.txt").read_text() == "handled evt_cwd"
    finally:
        signal_child(inbox, signal.SIGTERM)
        await asyncio.wait_for(inbox.communicate(), 15)


def test_a_handler_module_not_found_says_where_python_looked_and_what_to_do(tmp_path: Path) -> None:
    # Given a configuration naming a handler module that is in no directory of the import path
    config = write_config(tmp_path / "warren.toml", handler="user_hooks_nowhere:on_event")
    # When the inbox starts
    result = subprocess.run(
        [WARREN_COMMAND, "inbox", "--config", str(config)], capture_output=True, text=True, timeout=30,
        env=_env(), cwd=tmp_path,
    )  # fmt: skip
    # Then the one line names the module, the path searched (the working directory first) and the fix
    line = one_line_error(result, 2)
    assert "no module named 'user_hooks_nowhere' on the import path" in line
    assert f"(sys.path: {tmp_path}, " in line and "site-packages" in line
    assert "run the command from the directory that holds user_hooks_nowhere.py" in line and "PYTHONPATH" in line
