"""The documentation's commands and snippets run as written, against the real RabbitMQ: what a new user copies
first (README.md's publishing script, docs/endpoints.md's "Set up once") works without anything added."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from tests.api.admin.flow_support import free_port
from tests.support.cli import clean_env
from tests.support.dead_letters import wait_depth
from tests.support.docs import ROOT, block_after, only_block
from tests.support.rabbit import RabbitServer
from tests.support.topology import declare
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)

VENV_BIN = str(Path(sys.executable).parent)  # where `warren` is installed beside this Python


async def test_the_readmes_publishing_script_publishes_and_exits_cleanly(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str, tmp_path: Path
) -> None:
    # Given the topology `warren setup` would declare, with an endpoint that takes order.paid
    config = make_config([{"name": "shop", "url": "https://hooks.example/shop", "events": ["order.*"]}])
    await declare(config)
    script = tmp_path / "publish.py"
    script.write_text(block_after(ROOT / "README.md", "Publishing from Python", "python"), encoding="utf-8")
    # When the README's script runs as it is written, pointed at the test's broker by the variables it reads
    env = clean_env({"WARREN_BROKER__URL": amqp_url, "WARREN_BROKER__PREFIX": prefix})
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    # Then it exits 0, saying so, with nothing on stderr (no "Event loop is closed" from an unclosed connection)
    assert process.returncode == 0, err.decode()
    assert out.decode().strip() == "10 of 10 confirmed"
    assert err.decode() == ""
    # And the one event and the ten are in the endpoint's queue
    assert await wait_depth(config, names.work_queue(prefix, "shop"), 11) == 11


async def _until_ready(process: asyncio.subprocess.Process, url: str, timeout: float = 60) -> None:
    """Until GET /readyz answers 200, or fail with what the commands printed if they end first."""
    deadline = asyncio.get_running_loop().time() + timeout
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while asyncio.get_running_loop().time() < deadline and process.returncode is None:
            try:
                async with session.get(url + "/readyz") as response:
                    if response.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.1)
    if process.returncode is None:
        os.killpg(process.pid, signal.SIGTERM)
    out, _ = await asyncio.wait_for(process.communicate(), 20)
    raise AssertionError(f"the commands ended with {process.returncode} before the API was ready:\n{out.decode()}")


async def test_set_up_once_runs_as_written_and_the_admin_api_answers(
    rabbit_server: RabbitServer, amqp_url: str, prefix: str, tmp_path: Path
) -> None:
    # Given docs/endpoints.md's configuration lines added to a file that names the broker (classic queues: on a
    # 3.10 node shared by parallel test runs, `warren setup` refuses new quorum queues past its open-files limit)
    document = ROOT / "docs" / "endpoints.md"
    broker = (
        f'[broker]\nurl = "{amqp_url}"\nmanagement_url = "{rabbit_server.management_url}"\nprefix = "{prefix}"\n'
        'queue_type = "classic"\n'
    )
    (tmp_path / "warren.toml").write_text(broker + only_block(document, "Set up once", "toml"), encoding="utf-8")
    # When its shell lines run as written, in a shell that has `warren` on its PATH (the API's port moved off
    # 8080 through the environment, as any key can be: other test runs may use the machine at once)
    port = free_port()
    env = clean_env({"PATH": VENV_BIN + os.pathsep + os.environ["PATH"], "WARREN_API__PORT": str(port)})
    process = await asyncio.create_subprocess_exec(
        "bash", "-eu", "-c", only_block(document, "Set up once", "sh"), cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        # Then `warren api` comes up, with the admin API behind its tokens
        await _until_ready(process, f"http://127.0.0.1:{port}")
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/v1/endpoints") as answer:
            assert answer.status == 401
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGTERM)  # the shell and the `warren api` it runs: their own group
            await asyncio.wait_for(process.communicate(), 20)
    # And the store the lines configured was made where the file says
    assert (tmp_path / "warren-store.sqlite3").exists()
