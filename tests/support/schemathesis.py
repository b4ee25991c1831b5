"""Running schemathesis against a running server's /openapi.json, with the options every such test shares."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

__all__ = ["run_schemathesis"]


def _executable() -> str:
    found = shutil.which("st", path=str(Path(sys.executable).parent)) or shutil.which("st")
    if found is None:
        pytest.fail("schemathesis is not installed (pip install -e '.[test]')")
    return found


async def run_schemathesis(
    url: str, token: str, *options: str, cwd: Path, max_examples: int, seed: str, timeout: float
) -> str:
    """Every check on every operation of ``url``'s document (plus ``options``); the output, asserted passed."""
    process = await asyncio.create_subprocess_exec(
        _executable(),
        "run",
        f"{url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        "all",
        *options,
        "--max-examples",
        str(max_examples),
        "--seed",
        seed,
        "--no-shrink",
        # ASCII only: the schema bounds strings in characters while the servers count some (keys) in
        # bytes of UTF-8, which JSON Schema cannot say; a 201-byte key is rightly a 422.
        "--generation-codec",
        "ascii",
        "--generation-database",
        "none",
        "--request-timeout",
        "10",
        "--no-color",
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    chunks: list[bytes] = []

    async def read_all() -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            chunks.append(chunk)
        await process.wait()

    try:
        await asyncio.wait_for(read_all(), timeout)
    except TimeoutError:
        process.kill()  # never left running behind the test
        await process.wait()
        partial = b"".join(chunks).decode(errors="replace")
        pytest.fail(f"schemathesis did not finish in {timeout:g} s; its output so far:\n{partial[-6000:]}")
    text = b"".join(chunks).decode(errors="replace")
    # Every response matched the document: status, headers, content type and body schema
    assert process.returncode == 0, text[-6000:]
    assert " passed" in text, text[-3000:]
    return text
