"""/openapi.json describes the running server: schemathesis fuzzes it and checks every response against it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.api.ingest.conftest import TOKEN, ApiServer
from tests.support.schemathesis import run_schemathesis
from warren.api.ingest.openapi import openapi_document
from warren.topology.config import WarrenConfig

Start = Callable[..., Awaitable[ApiServer]]


def test_document_carries_the_configured_limits() -> None:
    doc = openapi_document(max_batch=50, max_body=10_000, max_payload=2048, allowed_event_types=("order.*",))
    schemas = doc["components"]["schemas"]
    assert doc["openapi"] == "3.1.0"
    assert schemas["BatchIn"]["properties"]["events"]["maxItems"] == 50
    assert "`order.*`" in schemas["EventIn"]["properties"]["type"]["description"]
    batch = doc["paths"]["/v1/events/batch"]["post"]
    [key] = batch["parameters"]
    assert key["name"] == "Idempotency-Key" and key["schema"]["maxLength"] == 200 - len(".49")
    assert set(batch["responses"]) == {"202", "207", "400", "401", "403", "408", "409", "413", "415", "422", "503"}
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
    # Then every response matched the document: status, headers, content type and body schema
    await run_schemathesis(
        api.url,
        TOKEN,
        # With a key store, a schema-valid request is rightly refused (422) when schemathesis reuses a key
        # with another body: that answer depends on history, not on the schema, so that one check is off.
        *(["--exclude-checks", "positive_data_acceptance"] if with_store else []),
        cwd=tmp_path,
        max_examples=8,
        seed="20261130",
        timeout=90,  # about 4 s alone; the bound is a hang guard
    )
