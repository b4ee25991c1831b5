"""`warren endpoint create|update|delete|rotate-secret|secret|test`, `warren store ...` and `warren setup` with a
store, against the real RabbitMQ and each store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import Result
from cryptography.fernet import Fernet
from standardwebhooks import Webhook
from typer.testing import CliRunner

from tests.api.admin.conftest import StandInApplier
from tests.support.cli import warren
from tests.support.deep_json import nested
from tests.support.processes import write_config
from tests.support.receiver import Receiver
from tests.support.store import store_postgres, store_url
from tests.support.topology import declare
from warren.api.admin.applier import LiveApplier
from warren.cli import app
from warren.topology.config import WarrenConfig

__all__ = ["store_postgres", "store_url"]

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def applier(monkeypatch: pytest.MonkeyPatch) -> StandInApplier:
    """TEST DOUBLE: ``warren.broker.live_apply`` comes from another branch; the CLI's LiveApplier calls this."""
    stand_in = StandInApplier()
    module = SimpleNamespace(apply_endpoint=stand_in.apply_endpoint, remove_endpoint=stand_in.remove_endpoint)
    monkeypatch.setattr(LiveApplier, "_module", lambda self: module)
    return stand_in


@pytest.fixture
async def config_file(make_config: Callable[..., WarrenConfig], store_url: str, tmp_path: Path) -> Path:
    config = make_config(
        [{"name": "from-file", "url": "http://127.0.0.1:9/f", "events": ["#"]}], store={"url": store_url}
    )
    await declare(config)
    return write_config(tmp_path, config)


async def cli(*args: str) -> Result:
    """The command in-process (in a thread: it runs its own event loop), as typer runs it."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args))


async def test_an_endpoint_through_its_whole_life_from_the_command_line(
    config_file: Path, applier: StandInApplier
) -> None:
    c = ("--config", str(config_file))
    async with Receiver() as receiver:
        # When an endpoint is created for a tenant
        created = await cli("endpoint", "create", "acme", "--url", receiver.url, "-e", "order.*", "-t", "acme",
                            *c, "--json")  # fmt: skip
        assert created.exit_code == 0, created.output
        secret = json.loads(created.output)["secret"]
        assert applier.applied[-1].name == "acme"
        # Then `secret` reveals it, and `list` shows it beside the file's endpoint
        revealed = await cli("endpoint", "secret", "acme", *c)
        assert revealed.output.strip() == secret
        listed = await cli("endpoint", "list", *c, "--json")
        assert listed.exit_code == 0, (listed.output, listed.exception)
        assert {row["endpoint"] for row in json.loads(listed.output)} == {"from-file", "acme"}
        # And a test event reaches it, signed with that secret
        tested = await cli("endpoint", "test", "acme", "--type", "order.test", *c)
        assert tested.exit_code == 0 and "delivered" in tested.output, tested.output
        Webhook(secret).verify(receiver.received[-1].body, dict(receiver.received[-1].headers))
    # When it is updated, paused and its secret rotated
    updated = await cli("endpoint", "update", "acme", "--concurrency", "3", *c)
    paused = await cli("endpoint", "pause", "acme", *c)
    rotated = await cli("endpoint", "rotate-secret", "acme", "--grace", "1h", *c, "--json")
    assert (updated.exit_code, paused.exit_code, rotated.exit_code) == (0, 0, 0), updated.output + paused.output
    new = json.loads(rotated.output)["secret"]
    # Then workers sign with both secrets, and both are revealed
    assert applier.applied[-1].concurrency == 3
    assert [s.reveal() for s in applier.applied[-1].secret] == [new, secret]
    assert (await cli("endpoint", "secret", "acme", *c)).output.split()[::6][:1] == [new]
    # And the file's endpoint cannot be changed from here
    refused = await cli("endpoint", "update", "from-file", "--concurrency", "2", *c)
    assert refused.exit_code == 1 and "configuration file" in refused.output
    # And deleting removes it
    deleted = await cli("endpoint", "delete", "acme", "--force", *c)
    assert deleted.exit_code == 0 and applier.removed == [("acme", True)]
    gone = await cli("endpoint", "show", "acme", *c)
    assert gone.exit_code == 2 and "unknown endpoint" in gone.output


async def test_setup_reconciles_the_file_and_store_commands_work(config_file: Path) -> None:
    c = ("--config", str(config_file))
    # When warren setup runs with a store configured
    setup = await cli("setup", *c)
    # Then the file's endpoint is stored as file-managed, and a second run changes nothing
    assert setup.exit_code == 0, setup.output
    assert "the file's endpoints 1 added (file-managed)" in setup.output
    again = await cli("setup", *c)
    assert "already stored" in again.output, again.output
    listed = await cli("endpoint", "list", *c, "--json")
    assert [row["endpoint"] for row in json.loads(listed.output)] == ["from-file"]
    # And the store's commands work as documented
    migrate = await cli("store", "migrate", *c)
    assert migrate.exit_code == 0 and "already at revision" in migrate.output, migrate.output
    Fernet((await cli("store", "generate-key")).output.strip().encode())  # a valid key
    # And the file's secret stays in the file
    secret = await cli("endpoint", "secret", "from-file", *c)
    assert secret.exit_code == 1 and "configuration file" in secret.output, secret.output


async def test_without_a_store_the_new_commands_say_how_to_configure_one(
    make_config: Callable[..., WarrenConfig], tmp_path: Path
) -> None:
    path = write_config(tmp_path, make_config([]))
    for args in (("endpoint", "create", "x", "--url", "http://127.0.0.1:9/", "-e", "#"), ("store", "migrate")):
        result = await warren(*args, "--config", str(path))
        assert result.code == 2 and "set [store] url" in result.err, result.err


async def test_api_refuses_admin_tokens_without_a_store(
    make_config: Callable[..., WarrenConfig], tmp_path: Path
) -> None:
    path = write_config(tmp_path, make_config([], api={"tokens": ["t" * 20], "admin_tokens": ["a" * 20]}))
    result = await cli("api", "--config", str(path))
    assert result.exit_code == 2 and "api.admin_tokens needs an endpoint store" in result.output, result.output


async def test_test_data_nested_too_deeply_is_one_clear_line(config_file: Path, applier: StandInApplier) -> None:
    c = ("--config", str(config_file))
    created = await cli("endpoint", "create", "acme", "--url", "http://127.0.0.1:9/hook", "-e", "order.*", *c)
    assert created.exit_code == 0, created.output
    for data, says, code in (
        (nested(50_000), "--data is not JSON", 2),  # beyond orjson; the standard library raised RecursionError
        (b'{"a": ' + nested(1000) + b', "a": 2}', "--data: duplicate key 'a'", 2),  # RecursionError too
        (nested(300), "data is not JSON-serialisable: Recursion limit reached", 1),  # TypeError from orjson.dumps
    ):
        result = await cli("endpoint", "test", "acme", "--data", data.decode(), *c)
        assert (result.exit_code, isinstance(result.exception, SystemExit)) == (code, True), result.exception
        assert says in result.output, result.output


async def test_ed25519_keys_from_the_command_line(config_file: Path, applier: StandInApplier) -> None:
    c = ("--config", str(config_file))
    # When an endpoint is created to sign with Ed25519 alone
    created = await cli("endpoint", "create", "ed", "--url", "http://127.0.0.1:9/e", "-e", "#", "--signing", "ed25519",
                        *c)  # fmt: skip
    assert created.exit_code == 0, created.output
    # Then its secret key is printed this once with its public key, and `public-keys` prints the public key
    secret_key = created.output.split("secret key  ")[1].split()[0]
    public = created.output.split("public key  ")[1].split()[0]
    assert secret_key.startswith("whsk_") and public.startswith("whpk_")
    assert [k.reveal() for k in applier.applied[-1].secret] == [secret_key]
    listed = await cli("endpoint", "public-keys", "ed", *c)
    assert listed.exit_code == 0 and listed.output.strip() == public
    assert (await cli("endpoint", "secret", "ed", *c)).output.strip() == ""  # never the secret key again
    # And a rotation of its key keeps the old one signing through the grace period
    rotated = await cli("endpoint", "rotate-secret", "ed", "--kind", "ed25519", "--grace", "1h", *c, "--json")
    assert rotated.exit_code == 0, rotated.output
    new_public = json.loads(rotated.output)["public_key"]
    both = await cli("endpoint", "public-keys", "ed", *c, "--json")
    assert [k["public_key"] for k in json.loads(both.output)] == [new_public, public]
    bad = await cli("endpoint", "rotate-secret", "ed", "--kind", "rsa", *c)
    assert bad.exit_code == 2 and "--kind" in bad.output
