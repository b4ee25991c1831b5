"""``warren key create|list|revoke``: tenant-scoped API keys, read and written in the store directly.

A key is confined to one tenant (docs/endpoints.md, "Tenant keys"): the admin API shows and changes only that
tenant's endpoints and attempts, and the ingest API publishes only its events. The same as
``/v1/tenants/{tenant}/keys`` of the admin API, for an operator on a machine that reaches the store.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from warren.common import EXIT_USAGE, ConfigOption, console, fail, load, run
from warren.core.moments import iso_utc

if TYPE_CHECKING:  # the store's libraries and the configuration load when the command runs, not for --help
    from warren.store.api_keys import ApiKey, ApiKeyStore
    from warren.topology.config import StoreSettings

__all__ = ["register"]

key_app = typer.Typer(name="key", help="Tenant-scoped API keys: make, list and revoke them.", no_args_is_help=True)

TenantOption = Annotated[str, typer.Option("--tenant", "-t", help="The tenant the key is confined to.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _settings(config: Path | None, tenant: str) -> StoreSettings:
    from warren.topology.config_fields import check_tenant

    try:
        check_tenant(tenant)
    except ValueError as exc:
        fail(f"--tenant: {exc}", EXIT_USAGE)
    settings = load(config).store
    if settings.url is None:
        fail("no store configured: set [store] url (docs/endpoints.md); the keys live there", EXIT_USAGE)
    return settings


def _with_keys(settings: StoreSettings, use: Any) -> Any:
    from warren.store.api_keys import ApiKeyStore
    from warren.store.engine import open_store_engine

    async def go() -> Any:
        engine = await open_store_engine(settings)
        try:
            return await use(ApiKeyStore(engine))
        finally:
            await engine.dispose()

    return run(go())


@key_app.command("create")
def create(
    tenant: TenantOption,
    name: Annotated[str | None, typer.Option("--name", help="What the key is for (shown in lists).")] = None,
    expires_in: Annotated[
        str | None, typer.Option("--expires-in", help="When it stops working: a duration (90d, 12h); default never.")
    ] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a key of TENANT and print it, once: the store keeps only its digest."""
    settings = _settings(config, tenant)
    seconds = None
    if expires_in is not None:
        from warren.topology.durations import parse_duration

        try:
            seconds = parse_duration(expires_in)
        except ValueError as exc:
            fail(f"--expires-in: {exc}", EXIT_USAGE)

    async def make(keys: ApiKeyStore) -> tuple[ApiKey, str]:
        return await keys.create(tenant, name=name, expires_at=None if seconds is None else time.time() + seconds)

    key, secret = _with_keys(settings, make)
    if as_json:
        typer.echo(json.dumps({**key.shown(time.time()), "key": secret}, indent=2))
        return
    console.print(f"key {key.id} of tenant {escape(tenant)} (shown once; the store keeps only its digest):")
    typer.echo(secret)


@key_app.command("list")
def list_keys(tenant: TenantOption, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """TENANT's keys, revoked ones too (never the keys themselves)."""
    settings = _settings(config, tenant)

    async def read(keys: ApiKeyStore) -> list[ApiKey]:
        return await keys.list(tenant)

    found: list[ApiKey] = _with_keys(settings, read)
    if as_json:
        typer.echo(json.dumps([k.shown(time.time()) for k in found], indent=2))
        return
    if not found:
        console.print(f"tenant {escape(tenant)} has no key", highlight=False)
        return
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    for column in ("id", "name", "created", "expires", "state"):
        table.add_column(column)
    now = time.time()
    for k in found:
        state = "revoked" if k.revoked_at is not None else "active" if k.active(now) else "expired"
        table.add_row(k.id, escape(k.name or ""), iso_utc(k.created_at) or "", iso_utc(k.expires_at) or "-", state)
    console.print(table)


@key_app.command("revoke")
def revoke(
    tenant: TenantOption,
    key_id: Annotated[str, typer.Argument(help="The key's id, as `warren key list` shows it.")],
    config: ConfigOption = None,
) -> None:
    """Revoke TENANT's key KEY_ID: refused from the next request on."""
    settings = _settings(config, tenant)

    async def end(keys: ApiKeyStore) -> ApiKey | None:
        return await keys.revoke(tenant, key_id)

    if _with_keys(settings, end) is None:
        fail(f"tenant {tenant!r} has no key {key_id!r} (`warren key list --tenant {tenant}` lists them)", 1)
    console.print(f"key {escape(key_id)} of tenant {escape(tenant)}: revoked", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(key_app)
