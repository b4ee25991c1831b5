"""Worker processes for tests: real ``warren worker`` subprocesses, stopped by PID when the test ends."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import tomli_w

from warren.topology.config import WarrenConfig


def write_config(directory: Path, config: WarrenConfig, name: str = "warren.toml") -> Path:
    """The configuration as a TOML file a subprocess can load (secrets written out in whsec_ form). Only what differs
    from the defaults is written, as a user writes it: a bench's baseline checkout (bench/worker_variant.py
    --source) loads the file too, and refuses the keys it does not know yet."""
    data = config.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    path = directory / name
    path.write_text(tomli_w.dumps(data))
    return path


def signal_child(process: asyncio.subprocess.Process | None, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to a child that may have ended already.

    Between a child's exit and asyncio noticing it, ``returncode`` is still None while the pid is reaped (or
    the transport closed): a signal sent then raises ProcessLookupError. A child that is gone needs no signal.
    """
    if process is not None and process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)


class WorkerProcess:
    """``warren worker`` in a subprocess; ``kill()`` is SIGKILL, ``terminate()`` SIGTERM and a wait."""

    def __init__(self, config_path: Path, *args: str, log_format: str | None = "json") -> None:
        """``log_format`` None leaves the choice to the configuration (text by default)."""
        self.config_path = config_path
        self.args = (*(("--log-format", log_format) if log_format else ()), *args)
        self.process: asyncio.subprocess.Process | None = None
        self.log_path = config_path.with_suffix(f".{os.getpid()}.{id(self)}.log")

    async def start(self) -> WorkerProcess:
        log = self.log_path.open("wb")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "warren",
            "worker",
            "--config",
            str(self.config_path),
            *self.args,
            stdout=log,
            stderr=log,
        )
        log.close()
        return self

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the worker logs that it is consuming (or fail with its log).

        A backstop, not a measure of startup: with two whole suites at once on 2 cores (and coverage in every
        child process), two workers in a row had not written their first log line after 15 s.
        """
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if b"worker consuming" in self.log_path.read_bytes():
                return
            assert self.process is not None
            if self.process.returncode is not None:
                break
            await asyncio.sleep(0.05)
        raise AssertionError(f"worker not ready in {timeout}s:\n{self.log_text()[-3000:]}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        signal_child(self.process)

    async def terminate(self, timeout: float = 20.0) -> int:
        assert self.process is not None
        signal_child(self.process, signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), timeout)

    async def cleanup(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.kill()
            await self.process.wait()


@contextlib.asynccontextmanager
async def running_workers(config_path: Path, count: int, *args: str) -> AsyncIterator[list[WorkerProcess]]:
    """``count`` worker processes, each consuming when the block starts, all killed when it ends."""
    workers = [WorkerProcess(config_path, *args) for _ in range(count)]
    try:
        for worker in workers:
            await worker.start()
        for worker in workers:
            await worker.wait_ready()
        yield workers
    finally:
        for worker in workers:
            await worker.cleanup()


class ApiProcess:
    """``warren api`` in a subprocess on 127.0.0.1:``port``; ``kill()`` is SIGKILL. Ready once /readyz says so."""

    def __init__(self, config_path: Path, port: int) -> None:
        self.config_path = config_path
        self.port = port
        self.process: asyncio.subprocess.Process | None = None
        self.log_path = config_path.with_suffix(f".api.{os.getpid()}.{id(self)}.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> ApiProcess:
        log = self.log_path.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "warren",
            "api",
            "--config",
            str(self.config_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            stdout=log,
            stderr=log,
        )
        log.close()
        return self

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Until GET /readyz answers 200 (or fail with the API's log)."""
        import aiohttp

        deadline = asyncio.get_running_loop().time() + timeout
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while asyncio.get_running_loop().time() < deadline:
                assert self.process is not None
                if self.process.returncode is not None:
                    break
                try:
                    async with session.get(self.url + "/readyz") as response:
                        if response.status == 200:
                            return
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await asyncio.sleep(0.05)
        log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        raise AssertionError(f"warren api not ready in {timeout}s:\n{log[-3000:]}")

    def kill(self) -> None:
        signal_child(self.process)

    async def cleanup(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.kill()
        if self.process is not None:
            await self.process.wait()
