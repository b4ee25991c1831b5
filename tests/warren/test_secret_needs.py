"""Each command needs only the secrets it uses: a worker's host need not hold the API's tokens, nor the API's
host the inbound sources' secrets (the real CLI, in child processes; no broker is reached)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import warren

pytestmark = pytest.mark.timeout(90)

CONFIG = """
[delivery]
allow_private_networks = true

[api]
tokens = ["env:MISSING_API_TOKEN_X"]

[[endpoints]]
name = "shop"
url = "http://127.0.0.1:9/hook"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
events = ["order.*"]

[[inbound]]
name = "psp"
verifier = "hmac-sha256"
secret = "env:MISSING_INBOUND_X"
header = "x-signature"
id_field = "id"
handler = "app.hooks:on_event"
"""


async def test_a_command_fails_only_for_a_secret_it_uses(tmp_path: Path) -> None:
    # Given a configuration whose API token and inbound secret are read from variables that are not set here
    path = tmp_path / "warren.toml"
    path.write_text(CONFIG)
    config = ("--config", str(path))
    # When the commands run
    topology = await warren("topology", "show", *config)
    worker = await warren("worker", "--endpoints", "nope", *config)  # past the load, it stops at the unknown name
    api = await warren("api", *config)
    receive = await warren("receive", *config)
    # Then those that use neither load the file: topology shows the plan, the worker gets as far as its arguments
    assert topology.code == 0 and "shop" in topology.out, topology.err
    assert worker.code == 2 and "nope" in worker.err, worker.err
    assert "MISSING_" not in topology.err + worker.err
    # And warren api and warren receive refuse to start, each naming its own variable only, without a traceback
    assert api.code == 2 and "MISSING_API_TOKEN_X" in api.err and "MISSING_INBOUND_X" not in api.err, api.err
    assert receive.code == 2 and "MISSING_INBOUND_X" in receive.err, receive.err
    assert "MISSING_API_TOKEN_X" not in receive.err and "Traceback" not in api.err + receive.err
