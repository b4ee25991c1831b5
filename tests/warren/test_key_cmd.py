"""`warren key create|list|revoke`: tenant-scoped API keys in each store, from the command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from tests.support.cli import warren
from tests.support.processes import write_config
from tests.support.store import store_postgres, store_url
from warren.cli import app
from warren.store.api_keys import ApiKeyStore
from warren.store.engine import open_engine
from warren.topology.config import WarrenConfig

__all__ = ["store_postgres", "store_url"]

pytestmark = pytest.mark.timeout(120)


async def cli(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args))


async def tenant_of(url: str, key: str) -> str | None:
    engine = open_engine(url)
    try:
        return await ApiKeyStore(engine).tenant_of(key)
    finally:
        await engine.dispose()


async def test_a_key_made_listed_and_revoked_from_the_command_line(store_url: str, tmp_path: Path) -> None:
    path = str(write_config(tmp_path, WarrenConfig(store={"url": store_url})))
    c = ("--config", path)
    # When a key of acme is made (in a child process, as a user runs it), then it is printed once and works
    made = await warren("key", "create", "--tenant", "acme", "--name", "billing portal", *c, "--json")
    assert made.code == 0, made.err
    created = json.loads(made.out)
    assert created["key"].startswith(f"wtk_{created['id']}_") and created["active"] is True
    assert await tenant_of(store_url, created["key"]) == "acme"
    plain = await cli("key", "create", "-t", "acme", "--expires-in", "90d", *c)
    assert plain.exit_code == 0 and "shown once" in plain.output and "wtk_" in plain.output
    # And the list shows both, never a key
    listed = await cli("key", "list", "--tenant", "acme", *c, "--json")
    keys = json.loads(listed.output)
    assert [k["name"] for k in keys] == ["billing portal", None] and keys[1]["expires_at"] is not None
    assert "wtk_" not in listed.output
    table = await cli("key", "list", "--tenant", "acme", *c)
    assert created["id"] in table.output and "active" in table.output
    # When it is revoked, then it no longer works and the list says so
    revoked = await cli("key", "revoke", "--tenant", "acme", created["id"], *c)
    assert revoked.exit_code == 0 and "revoked" in revoked.output
    assert await tenant_of(store_url, created["key"]) is None
    assert "revoked" in (await cli("key", "list", "--tenant", "acme", *c)).output
    # And mistakes are said plainly: another tenant's key, a bad tenant, a bad duration, no store
    other = await cli("key", "revoke", "--tenant", "globex", keys[1]["id"], *c)
    assert other.exit_code == 1 and "has no key" in other.output
    assert (await cli("key", "list", "--tenant", "Acme Corp", *c)).exit_code == 2
    assert (await cli("key", "create", "--tenant", "acme", "--expires-in", "soon", *c)).exit_code == 2
    bare = str(write_config(tmp_path, WarrenConfig(), name="bare.toml"))
    none = await cli("key", "list", "--tenant", "acme", "--config", bare)
    assert none.exit_code == 2 and "[store] url" in none.output
    assert "tenant globex has no key" in (await cli("key", "list", "--tenant", "globex", *c)).output
