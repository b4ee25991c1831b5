"""``warren store migrate|generate-key|rekey``: the endpoint store's schema and the keys that seal its secrets."""

from __future__ import annotations

import typer

from warren.common import EXIT_USAGE, ConfigOption, console, fail, load, run

__all__ = ["register"]

store_app = typer.Typer(
    name="store", help="The endpoint store: migrate its schema, make and rotate its keys.", no_args_is_help=True
)


@store_app.command("migrate")
def migrate_store(config: ConfigOption = None) -> None:
    """Bring the store's schema to this version of Warren (idempotent; `warren api` also does it on start)."""
    settings = load(config)
    url = settings.store.url
    if url is None:
        fail("no endpoint store configured: set [store] url (docs/endpoints.md)", EXIT_USAGE)

    from warren.store.engine import migrate, open_engine

    async def go() -> tuple[str | None, str | None]:
        engine = open_engine(url)
        try:
            return await migrate(engine)
        finally:
            await engine.dispose()

    before, after = run(go())
    if before == after:
        console.print(f"store: already at revision {after}", highlight=False)
    else:
        console.print(f"store: migrated from {before or 'empty'} to revision {after}", highlight=False)


@store_app.command("generate-key")
def generate() -> None:
    """Print a new Fernet key for store.keys (e.g. export WARREN_STORE_KEY=...)."""
    from warren.store.keys import generate_key

    typer.echo(generate_key())


@store_app.command("rekey")
def rekey(config: ConfigOption = None) -> None:
    """Seal every stored secret again with the first of store.keys (after putting a new key first)."""
    settings = load(config)
    if settings.store.url is None:
        fail("no endpoint store configured: set [store] url (docs/endpoints.md)", EXIT_USAGE)

    from warren.store.repository import EndpointStore

    async def go() -> int:
        store = await EndpointStore.open(settings.store)
        try:
            return await store.rekey()
        finally:
            await store.close()

    count = run(go())
    console.print(
        f"store: {count} secret(s) sealed with the first key; older keys can now be removed from the store's "
        "configuration (workers keep them until each live endpoint is applied again: docs/configuration.md)",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(store_app)
