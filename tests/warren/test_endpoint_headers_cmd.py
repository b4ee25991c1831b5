"""`warren endpoint create|update|show|test` with per-endpoint headers and proxies, against the real RabbitMQ and each
store: secret values never printed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.api.admin.conftest import StandInApplier
from tests.support.processes import write_config
from tests.support.receiver import Receiver
from tests.support.store import store_postgres, store_url
from tests.support.topology import declare
from tests.warren.test_endpoint_edit_cmd import applier, cli
from warren.topology.config import WarrenConfig

__all__ = ["applier", "store_postgres", "store_url"]

pytestmark = pytest.mark.timeout(120)

FILE_HEADERS = {"X-Team": "billing", "Authorization": {"value": "Bearer f1le-s3cret", "secret": True}}


@pytest.fixture
async def config_file(make_config: Callable[..., WarrenConfig], store_url: str, tmp_path: Path) -> Path:
    endpoint = {"name": "from-file", "url": "http://127.0.0.1:9/f", "events": ["#"], "headers": FILE_HEADERS}
    config = make_config([endpoint], store={"url": store_url}, delivery={"proxies": {"eu": "http://10.0.0.1:3128"}})
    await declare(config)
    return write_config(tmp_path, config)


async def test_headers_from_the_command_line_are_sent_and_never_printed(
    config_file: Path, applier: StandInApplier, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = ("--config", str(config_file))
    monkeypatch.setenv("PARTNER_TOKEN", "Bearer cl1-s3cret")
    async with Receiver() as receiver:
        # When an endpoint is created with a plain header and a secret one read from the environment
        secret_header = ("--secret-header", "Authorization: env:PARTNER_TOKEN")
        created = await cli("endpoint", "create", "acme", "--url", receiver.url, "-e", "order.*", "-H", "X-Team: ops",
                            *secret_header, "--proxy", "direct", *c, "--json")  # fmt: skip
        assert created.exit_code == 0, created.output
        # Then workers are told the value, the output shows ***
        assert applier.applied[-1].headers.outgoing() == {"X-Team": "ops", "Authorization": "Bearer cl1-s3cret"}
        shown = json.loads(created.output)["options"]
        assert shown["headers"] == {"X-Team": "ops", "Authorization": {"value": "***", "secret": True}}
        assert shown["proxy"] == "direct" and "cl1-s3cret" not in created.output
        # And a test event carries both headers
        tested = await cli("endpoint", "test", "acme", *c)
        assert tested.exit_code == 0, tested.output
        assert receiver.received[-1].headers["Authorization"] == "Bearer cl1-s3cret"
        assert receiver.received[-1].headers["X-Team"] == "ops"
    # When the headers are replaced, then removed, and a named proxy chosen
    replaced = await cli("endpoint", "update", "acme", "-H", "X-Other: 1", "--proxy", "eu", *c, "--json")
    assert json.loads(replaced.output)["options"]["headers"] == {"X-Other": "1"}, replaced.output
    assert applier.applied[-1].proxy == "eu"
    removed = await cli("endpoint", "update", "acme", "--no-headers", *c)
    assert removed.exit_code == 0 and not applier.applied[-1].headers, removed.output
    # And a header Warren owns, a malformed line or an unknown proxy is refused, saying why
    for args, why in [
        (("-H", "webhook-id: forged"), "header 'webhook-id' cannot be set"),
        (("-H", "no colon here"), "'Name: value'"),
        (("--proxy", "us"), "proxy 'us' is not one of [delivery.proxies] (eu)"),
    ]:
        refused = await cli("endpoint", "update", "acme", *args, *c)
        assert refused.exit_code != 0 and why in refused.output, refused.output


async def test_show_hides_a_file_endpoints_secret_header(config_file: Path) -> None:
    c = ("--config", str(config_file))
    as_json = await cli("endpoint", "show", "from-file", *c, "--json")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["headers"] == {"X-Team": "billing", "Authorization": {"value": "***", "secret": True}}
    as_text = await cli("endpoint", "show", "from-file", *c)
    assert "X-Team: billing" in as_text.output and "Authorization: ***" in as_text.output
    assert "f1le-s3cret" not in as_json.output + as_text.output
