"""The endpoint store on SQLite and PostgreSQL: migrations, sealed secrets, rotation, pages, the file's endpoints."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from cryptography.fernet import Fernet
from sqlalchemy import select, text

from tests.support.store import STORE_KEY
from warren.store.engine import current_revision, head_revision, migrate, open_engine
from warren.store.keys import StoreKeyError, sealer_from
from warren.store.records import FILE, new_signing_secret, to_endpoint
from warren.store.repository import EndpointStore, NameTaken
from warren.store.tables import Base, SecretRow
from warren.topology.config import Endpoint, StoreSettings

pytestmark = pytest.mark.timeout(30)


def endpoint(name: str, secret: str, **fields: object) -> Endpoint:
    return Endpoint.model_validate(
        {"name": name, "url": f"https://hooks.example.com/{name}", "events": ["order.*"], "secret": secret, **fields}
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[EndpointStore]:
    opened = await EndpointStore.open(StoreSettings(url=store_url))
    yield opened
    await opened.close()


async def test_migrations_are_idempotent_and_build_exactly_the_models(store_url: str) -> None:
    # Given a migrated store (the fixture migrated it)
    engine = open_engine(store_url)
    try:
        # When migrating again
        before, after = await migrate(engine)
        # Then nothing happens, the head revision is recorded, and the schema is the models' (no autogenerate diff)
        assert before == after == head_revision() == await current_revision(engine)
        async with engine.connect() as connection:
            diff = await connection.run_sync(
                lambda sync: compare_metadata(
                    MigrationContext.configure(sync, opts={"version_table": "warren_store_version"}), Base.metadata
                )
            )
        assert diff == []
    finally:
        await engine.dispose()


async def test_secrets_are_sealed_at_rest_and_open_only_with_a_configured_key(
    store: EndpointStore, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an endpoint created with a secret
    secret = new_signing_secret()
    await store.create(endpoint("acme-orders", secret), tenant="acme", secret=secret)
    # Then the row holds no trace of the secret's text, and the store reveals it
    async with store.engine.connect() as connection:
        sealed = (await connection.execute(select(SecretRow.sealed))).scalar_one()
    assert secret not in sealed and secret.removeprefix("whsec_") not in sealed
    [revealed] = await store.signing_secrets("acme-orders")
    assert revealed.text == secret and secret not in repr(revealed)
    # When the key rotates (a new key first, the old one kept after it) and everything is re-sealed
    new_key = Fernet.generate_key().decode()
    monkeypatch.setenv("WARREN_STORE_KEY_NEW", new_key)
    rotated = await EndpointStore.open(StoreSettings(url=store_url, keys=("env:WARREN_STORE_KEY_NEW", STORE_KEY)))
    try:
        assert await rotated.rekey() == 1
    finally:
        await rotated.close()
    # Then the new key alone opens it, and the old key alone no longer does
    only_new = await EndpointStore.open(StoreSettings(url=store_url, keys=(new_key,)))
    only_old = await EndpointStore.open(StoreSettings(url=store_url, keys=(STORE_KEY,)))
    try:
        assert [s.text for s in await only_new.signing_secrets("acme-orders")] == [secret]
        with pytest.raises(StoreKeyError, match=r"opens with none of store\.keys"):
            await only_old.signing_secrets("acme-orders")
    finally:
        await only_new.close()
        await only_old.close()


def test_missing_or_malformed_keys_are_named_with_a_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WARREN_STORE_KEY", raising=False)
    with pytest.raises(StoreKeyError, match=r"WARREN_STORE_KEY.*not set.*warren store generate-key"):
        sealer_from(("env:WARREN_STORE_KEY",))
    with pytest.raises(StoreKeyError, match=r"store.keys\[0\] is not a Fernet key"):
        sealer_from(("not-a-key",))


async def test_rotation_keeps_the_old_secret_signing_until_its_grace_period_ends(store_url: str) -> None:
    # Given an endpoint with one secret, and a store whose clock the test moves
    clock = Clock()
    opened = await EndpointStore.open(StoreSettings(url=store_url))
    store = EndpointStore(opened.engine, sealer_from((STORE_KEY,)), clock)
    try:
        old, new = new_signing_secret(), new_signing_secret()
        await store.create(endpoint("billing", old), tenant=None, secret=old)
        # When the secret rotates with a 60 s grace period
        rotated = await store.rotate("billing", new, grace=60)
        assert rotated is not None and [s.expires_at for s in rotated.secrets] == [None, clock.now + 60]
        # Then both sign, newest first, and the endpoint served carries both
        signing = await store.signing_secrets("billing")
        assert [s.text for s in signing] == [new, old]
        served = to_endpoint(rotated, signing).secret
        assert [s.expires_at for s in served] == [None, clock.now + 60]
        # (the endpoint served signs with the old one until its end, then with the new one alone)
        assert len(served.signing(clock.now + 59.9)) == 2
        assert [s.reveal() for s in served.signing(clock.now + 60)] == [new]
        assert await store.expired() == []
        # And once the grace period is over only the new one signs, and the old one is due for removal
        clock.now += 61
        assert [s.text for s in await store.signing_secrets("billing")] == [new]
        assert await store.expired() == ["billing"]
        assert await store.drop_expired("billing") == 1
        assert await store.expired() == []
    finally:
        await opened.close()


async def test_pages_filters_and_unique_names(store: EndpointStore) -> None:
    # Given seven endpoints of two tenants and one platform endpoint
    for i in range(7):
        secret = new_signing_secret()
        await store.create(endpoint(f"ep-{i}", secret), tenant="acme" if i % 2 else "globex", secret=secret)
    await store.create(endpoint("platform", new_signing_secret()), tenant=None, secret=new_signing_secret())
    # Then a name cannot be taken twice
    with pytest.raises(NameTaken):
        await store.create(endpoint("ep-0", new_signing_secret()), tenant=None, secret=new_signing_secret())
    # And pages follow name order from a cursor, filtered by tenant
    first = await store.list_endpoints(tenant="acme", limit=2)
    rest = await store.list_endpoints(tenant="acme", after=first[-1].name)
    assert [e.name for e in first + rest] == ["ep-1", "ep-3", "ep-5"]
    assert await store.tenants() == ["acme", "globex"]
    assert len(await store.list_endpoints()) == 8


async def test_the_files_endpoints_are_reconciled_and_never_overwrite_api_ones(store: EndpointStore) -> None:
    # Given an API endpoint "shared" and a first reconcile of the file
    secret = new_signing_secret()
    await store.create(endpoint("shared", secret), tenant=None, secret=secret)
    first = await store.reconcile_file([endpoint("a", secret), endpoint("b", secret), endpoint("shared", secret)])
    assert (first.added, first.taken) == (["a", "b"], ["shared"])
    # When the file changes: a's url changes, b goes, c comes
    changed = endpoint("a", secret).model_copy(update={"url": "https://hooks.example.com/a2"})
    second = await store.reconcile_file([changed, endpoint("c", secret)])
    # Then the store follows the file, and the file's secrets are not stored
    assert (second.added, second.updated, second.removed) == (["c"], ["a"], ["b"])
    a = await store.get("a")
    assert a is not None and a.managed_by == FILE and a.url.endswith("/a2") and a.secrets == ()
    assert (await store.get("shared")).managed_by == "api"  # type: ignore[union-attr]
    # And reconciling the same file again changes nothing
    again = await store.reconcile_file([changed, endpoint("c", secret)])
    assert (again.added, again.updated, again.removed) == ([], [], [])
    async with store.engine.connect() as connection:
        assert (await connection.execute(text("select count(*) from warren_endpoint_secrets"))).scalar_one() == 1


async def test_endpoints_of_a_new_tenant_created_or_moved_at_once_are_all_stored(store: EndpointStore) -> None:
    # Given eight endpoints of one tenant that does not exist yet, created at the same time (the admin API takes
    # requests concurrently)
    secrets = [new_signing_secret() for _ in range(8)]
    created = await asyncio.gather(
        *(store.create(endpoint(f"t-{i}", s), tenant="newco", secret=s) for i, s in enumerate(secrets)),
        return_exceptions=True,
    )
    # Then every one is stored (each create added the tenant if it was missing: all but one found it missing
    # and the others' inserts failed the tenant's key, reported as "endpoint exists already")
    assert [r for r in created if isinstance(r, BaseException)] == []
    assert [e.name for e in await store.list_endpoints(tenant="newco")] == [f"t-{i}" for i in range(8)]
    # And moved to another new tenant at the same time, every one is moved (that failed with a 500)
    moved = await asyncio.gather(
        *(store.update(endpoint(f"t-{i}", s), tenant="otherco") for i, s in enumerate(secrets)), return_exceptions=True
    )
    assert [r for r in moved if isinstance(r, BaseException)] == []
    assert len(await store.list_endpoints(tenant="otherco")) == 8
    assert await store.tenants() == ["newco", "otherco"]


async def test_secret_header_values_are_sealed_and_rekeyed_with_the_signing_secrets(
    store: EndpointStore, store_url: str
) -> None:
    # Given an endpoint with a secret header, stored with the old key
    secret = new_signing_secret()
    headers = {"X-Team": "ops", "Authorization": {"value": "Bearer rek3y-me", "secret": True}}
    await store.create(endpoint("acme-orders", secret, headers=headers), tenant="acme", secret=secret)
    # When the key rotates and everything is re-sealed: the signing secret and the header value
    new_key = Fernet.generate_key().decode()
    rotated = await EndpointStore.open(StoreSettings(url=store_url, keys=(new_key, STORE_KEY)))
    try:
        assert await rotated.rekey() == 2
    finally:
        await rotated.close()
    # Then the new key alone opens the header value, and the old key alone no longer does
    only_new = await EndpointStore.open(StoreSettings(url=store_url, keys=(new_key,)))
    only_old = await EndpointStore.open(StoreSettings(url=store_url, keys=(STORE_KEY,)))
    try:
        stored = await only_new.get("acme-orders")
        assert stored is not None and "rek3y" not in str(stored.options)
        signing = await only_new.signing_secrets("acme-orders")
        served = to_endpoint(stored, signing, only_new.sealer.open)
        assert served.headers.outgoing() == {"X-Team": "ops", "Authorization": "Bearer rek3y-me"}
        with pytest.raises(StoreKeyError, match=r"opens with none of store\.keys"):
            to_endpoint(stored, signing, only_old.sealer.open)
    finally:
        await only_new.close()
        await only_old.close()
