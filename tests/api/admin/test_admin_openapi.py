"""The admin API's part of /openapi.json describes the running server: schemathesis checks every operation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.api.admin.conftest import ADMIN_TOKEN, AdminServer
from tests.support.schemathesis import run_schemathesis

Start = Callable[..., Awaitable[AdminServer]]


# One store is enough here: what differs between stores is tested in test_admin_api.py.
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
@pytest.mark.timeout(120)
async def test_schemathesis_finds_no_difference_between_admin_document_and_server(
    start_admin: Start, tmp_path: Path
) -> None:
    # Given the API with its admin routes, a store and one endpoint from the file (read-only here)
    admin = await start_admin([{"name": "from-file", "url": "http://127.0.0.1:9/f", "events": ["#"]}])
    # When schemathesis generates valid and invalid requests for every admin operation
    # Then every response matched the document: status, headers, content type and body schema
    text = await run_schemathesis(
        admin.api.url,
        ADMIN_TOKEN,
        "--include-path-regex",
        "^/v1/(endpoints|tenants|event-types)|/attempts$",  # the admin operations, the attempt log of an event
        # The test send reaches out to the endpoint's URL: generated URLs are not ours to call (tested apart).
        "--exclude-operation-id",
        "testEndpoint",
        # A schema-valid request is rightly refused when it depends on what exists (a name taken, a URL whose
        # host is private or does not resolve): that answer depends on state, not on the schema.
        "--exclude-checks",
        "positive_data_acceptance",
        # Random valid and invalid requests per operation. The coverage phase (every parameter's boundaries,
        # ~700 requests) passes too but takes minutes on a loaded machine; the stateful phase, without links
        # between operations, only repeats 404s.
        "--phases",
        "examples,fuzzing",
        cwd=tmp_path,
        max_examples=10,
        seed="20261201",
        timeout=110,
    )
    assert "Tested: 23" in text, text[-3000:]  # every admin operation but the test send
