"""/openapi.json describes the running server: schemathesis fuzzes it and checks every response against it."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.broker.ingest.conftest import TOKEN, ApiServer
from warren.broker.ingest.openapi import openapi_document
from warren.topology.config import WarrenConfig

Start = Callable[..., Awaitable[ApiServer]]


def _schemathesis() -> str:
    found = shutil.which("st", path=str(Path(sys.executable).parent)) or shutil.which("st")
    if found is None:
        pytest.fail("schemathesis is not installed (pip install -e '.[test]')")
    return found


def test_document_carries_the_configured_limits() -> None:
    doc = openapi_document(max_batch=50, max_body=10_000, max_payload=2048, allowed_event_types=("order.*",))
    schemas = doc["components"]["schemas"]
    assert doc["openapi"] == "3.1.0"
    assert schemas["BatchIn"]["properties"]["events"]["maxItems"] == 50
    assert "`order.*`" in schemas["EventIn"]["properties"]["type"]["description"]
    batch = doc["paths"]["/v1/events/batch"]["post"]
    [key] = batch["parameters"]
    assert key["name"] == "Idempotency-Key" and key["schema"]["maxLength"] == 200 - len(".49")
    assert set(batch["responses"]) == {"202", "207", "400", "401", "408", "409", "413", "415", "422", "503"}
    assert batch["responses"]["503"]["headers"]["Retry-After"]["required"] is True


@pytest.mark.parametrize("with_store", [False, True], ids=["no-key-store", "sqlite-key-store"])
async def test_schemathesis_finds_no_difference_between_document_and_server(
    api_config: Callable[..., WarrenConfig], start_api: Start, tmp_path: Path, with_store: bool
) -> None:
    # Given the API running against a real RabbitMQ (routable types give 202, others 409), with and without
    # an idempotency store (whose replays, conflicts and in-progress answers the document must list too)
    api_settings: dict[str, object] = {"max_batch": 20}
    if with_store:
        api_settings["idempotency_store"] = f"sqlite:///{tmp_path / 'keys.sqlite3'}"
    api = await start_api(
        api_config(
            api=api_settings, endpoints=[{"name": "all", "url": "http://127.0.0.1:9/hook", "events": ["#.a", "*"]}]
        )
    )
    # When schemathesis generates valid and invalid requests from /openapi.json, a few per operation
    process = await asyncio.create_subprocess_exec(
        _schemathesis(),
        "run",
        f"{api.url}/openapi.json",
        "--header",
        f"Authorization: Bearer {TOKEN}",
        "--checks",
        "all",
        # With a key store, a schema-valid request is rightly refused (422) when schemathesis reuses a key
        # with another body: that answer depends on history, not on the schema, so that one check is off.
        *(["--exclude-checks", "positive_data_acceptance"] if with_store else []),
        "--max-examples",
        "8",
        "--seed",
        "20261130",
        "--no-shrink",
        # ASCII only: the schema bounds `key` in characters (maxLength 200) while the server counts
        # 200 bytes of UTF-8, which JSON Schema cannot say; a 201-byte key is rightly a 422.
        "--generation-codec",
        "ascii",
        "--generation-database",
        "none",
        "--request-timeout",
        "5",
        "--no-color",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 45)
    text = output.decode(errors="replace")
    # Then every response matched the document: status, headers, content type and body schema
    assert process.returncode == 0, text[-6000:]
    assert " passed" in text, text[-3000:]
