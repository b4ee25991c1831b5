"""Ed25519 keys through the admin API and each store: made at creation, rotated per scheme with a grace period,
public keys readable, the secret key shown once and never again."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable

import nacl.signing
import pytest

from tests.api.admin.conftest import AdminServer
from tests.conftest import TEST_SECRET
from warren.api.admin.app import SERVICE
from warren.topology.signing_keys import Ed25519Secret, new_ed25519_secret, scheme_of

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = pytest.mark.timeout(30)


def spec(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "url": "http://127.0.0.1:9/hook", "events": ["order.*"], **fields}


def _libsodium_public(secret_key: str) -> str:
    """The whpk_ of a whsk_, as libsodium derives it (not Warren's code)."""
    seed = base64.b64decode(secret_key.removeprefix("whsk_"))
    return "whpk_" + base64.b64encode(bytes(nacl.signing.SigningKey(seed).verify_key)).decode()


async def test_an_endpoint_made_with_both_schemes_shows_its_secret_key_once_and_its_public_key_always(
    start_admin: Start,
) -> None:
    admin = await start_admin()
    # When an endpoint is created to sign with HMAC and Ed25519
    created = await admin.call("POST", "/v1/endpoints", spec("acme", signing=["hmac", "ed25519"]))
    assert created.status == 201, created.body
    secret, secret_key, public = created.body["secret"], created.body["secret_key"], created.body["public_key"]
    # Then the answer holds the HMAC secret, the Ed25519 secret key (this once) and its public key
    assert secret.startswith("whsec_") and secret_key.startswith("whsk_")
    assert public == _libsodium_public(secret_key)
    assert [(scheme_of(k), k.reveal()) for k in admin.applier.applied[-1].secret] == [
        ("hmac", secret),
        ("ed25519", secret_key),
    ]
    # And reading it shows each key's scheme and the public key, never the secret key
    read = await admin.call("GET", "/v1/endpoints/acme")
    assert [(s["scheme"], s["public_key"]) for s in read.body["secrets"]] == [("hmac", None), ("ed25519", public)]
    assert read.body["options"]["signing"] == ["hmac", "ed25519"]
    keys = await admin.call("GET", "/v1/endpoints/acme/public-keys")
    assert [k["public_key"] for k in keys.body["keys"]] == [public] and keys.body["keys"][0]["expires_at"] is None
    # And the reveal shows the HMAC secret only: the secret key never again
    revealed = await admin.call("GET", "/v1/endpoints/acme/secret")
    assert [s["secret"] for s in revealed.body["secrets"]] == [secret]
    for answer in (read, keys, revealed, await admin.call("GET", "/v1/endpoints")):
        assert secret_key not in str(answer.body)


async def test_an_ed25519_rotation_ends_the_old_key_after_its_grace_and_leaves_the_hmac_secret(
    start_admin: Start,
) -> None:
    admin = await start_admin()
    created = await admin.call("POST", "/v1/endpoints", spec("acme", signing=["hmac", "ed25519"]))
    old_public = created.body["public_key"]
    # When the Ed25519 key rotates with a one-hour grace period
    rotated = await admin.call("POST", "/v1/endpoints/acme/rotate-secret", {"kind": "ed25519", "grace": 3600})
    assert rotated.status == 200, rotated.body
    new_key, new_public = rotated.body["secret_key"], rotated.body["public_key"]
    assert rotated.body["secret"] == new_key and new_public == _libsodium_public(new_key)
    # Then workers sign with the new key, the old one until its end, and the HMAC secret as before
    applied = admin.applier.applied[-1].secret
    ends = {(scheme_of(k), k.expires_at is not None) for k in applied}
    assert ends == {("ed25519", False), ("ed25519", True), ("hmac", False)} and len(applied) == 3
    assert next(iter(applied)).reveal() == new_key
    keys = await admin.call("GET", "/v1/endpoints/acme/public-keys")
    assert [k["public_key"] for k in keys.body["keys"]] == [new_public, old_public]
    assert keys.body["keys"][0]["expires_at"] is None and keys.body["keys"][1]["expires_at"]
    revealed = await admin.call("GET", "/v1/endpoints/acme/secret")
    assert [s["expires_at"] for s in revealed.body["secrets"]] == [None]  # the HMAC secret did not rotate
    # And an HMAC rotation with no grace leaves both Ed25519 keys as they were
    await admin.call("POST", "/v1/endpoints/acme/rotate-secret", {"grace": 0})
    after = [(scheme_of(k), k.expires_at is not None) for k in admin.applier.applied[-1].secret]
    assert sorted(after) == [("ed25519", False), ("ed25519", True), ("hmac", False)]


async def test_a_migration_adds_a_key_then_signs_with_ed25519_alone(start_admin: Start) -> None:
    admin = await start_admin()
    created = await admin.call("POST", "/v1/endpoints", spec("acme"))
    assert created.body["secret_key"] is None and created.body["public_key"] is None
    # When an HMAC endpoint gets an Ed25519 key: it signs with both from now on
    added = await admin.call("POST", "/v1/endpoints/acme/rotate-secret", {"kind": "ed25519"})
    assert sorted(scheme_of(k) for k in admin.applier.applied[-1].secret) == ["ed25519", "hmac"]
    assert all(k.expires_at is None for k in admin.applier.applied[-1].secret)
    # And once its receivers verify v1a, signing = ["ed25519"] stops the v1 signatures (the secret is kept)
    moved = await admin.call("PATCH", "/v1/endpoints/acme", {"signing": ["ed25519"]})
    assert moved.status == 200, moved.body
    assert admin.applier.applied[-1].signing == ("ed25519",) and len(admin.applier.applied[-1].secret) == 2
    assert added.body["public_key"] == Ed25519Secret(added.body["secret_key"]).public_key()
    # But an endpoint cannot be told to sign with a scheme it has no key for
    bare = await admin.call("POST", "/v1/endpoints", spec("plain"))
    refused = await admin.call("PATCH", "/v1/endpoints/plain", {"signing": ["ed25519"]})
    assert bare.status == 201 and (refused.status, refused.body["error"]) == (422, "invalid_endpoint")
    assert "no 'whsk_' key" in str(refused.body)


async def test_given_keys_and_refusals(start_admin: Start) -> None:
    admin = await start_admin()
    mine = new_ed25519_secret()
    given = await admin.call("POST", "/v1/endpoints", spec("own", secret=mine))
    assert given.status == 201 and given.body["secret"] == mine and given.body["secret_key"] == mine
    assert [scheme_of(k) for k in admin.applier.applied[-1].secret] == ["ed25519"]
    mismatch = await admin.call("POST", "/v1/endpoints/own/rotate-secret", {"kind": "hmac", "secret": mine})
    assert (mismatch.status, mismatch.body["error"]) == (422, "invalid_endpoint")
    public = await admin.call("POST", "/v1/endpoints", spec("pub", secret="whpk_" + "A" * 43 + "="))
    assert public.status == 422


async def test_a_file_endpoints_public_keys_come_from_the_file(start_admin: Start) -> None:
    key = new_ed25519_secret()
    admin = await start_admin(
        [{"name": "from-file", "url": "http://127.0.0.1:9/f", "events": ["#"], "secret": [TEST_SECRET, key]}]
    )
    service = await admin.api.app[SERVICE].get()
    await service.store.reconcile_file(admin.config.endpoints)
    keys = await admin.call("GET", "/v1/endpoints/from-file/public-keys")
    assert keys.status == 200, keys.body
    assert keys.body["keys"] == [
        {"public_key": Ed25519Secret(key).public_key(), "created_at": None, "expires_at": None}
    ]


async def test_a_rotation_without_a_kind_rotates_the_only_scheme_an_endpoint_has(start_admin: Start) -> None:
    # (the portal's "Rotate the secret" sends no kind: an Ed25519-only endpoint must not start signing with HMAC)
    admin = await start_admin()
    await admin.call("POST", "/v1/endpoints", spec("ed", signing=["ed25519"]))
    rotated = await admin.call("POST", "/v1/endpoints/ed/rotate-secret", {"grace": 60})
    assert rotated.status == 200 and rotated.body["secret_key"].startswith("whsk_")
    assert [scheme_of(k) for k in admin.applier.applied[-1].secret] == ["ed25519", "ed25519"]
