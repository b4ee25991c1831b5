"""The admin API's models for signing keys: what a secret's metadata shows (its scheme, an Ed25519 key's public
key), the fields of an answer that made a key, and the public keys route. Split from schemas.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

__all__ = ["MadeKeys", "PublicKeyInfo", "PublicKeys", "SecretInfo", "Signing", "SigningList"]

Signing = Literal["hmac", "ed25519"]
SigningList = Annotated[
    list[Signing] | None,
    Field(min_length=1, max_length=2, description="Schemes that sign; a create makes a key for each."),
]


class SecretInfo(BaseModel):
    created_at: str
    expires_at: str | None = Field(description="Set on a secret a rotation replaced: it signs until then.")
    scheme: Signing = Field(default="hmac", description="'hmac' (whsec_, v1 signatures) or 'ed25519' (whsk_, v1a).")
    public_key: str | None = Field(default=None, description="An Ed25519 key's public key (whpk_), for receivers.")


class MadeKeys(BaseModel):
    """Beside ``secret``, in an answer that made keys."""

    secret_key: str | None = Field(
        default=None, description="The Ed25519 secret key (whsk_) made: shown this once, never again."
    )
    public_key: str | None = Field(default=None, description="Its public key (whpk_): what receivers verify with.")


class PublicKeyInfo(BaseModel):
    public_key: str = Field(description="whpk_ and the base64 of the 32-byte Ed25519 public key.")
    created_at: str | None = Field(description="Null for a key of the configuration file.")
    expires_at: str | None = Field(description="Set on a key a rotation replaced: it signs until then.")


class PublicKeys(BaseModel):
    name: str
    keys: list[PublicKeyInfo] = Field(description="Newest first; every one verifies the v1a signatures it makes.")
