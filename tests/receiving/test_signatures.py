"""Standard Webhooks verification, and interop both ways with the independent ``standardwebhooks`` package."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from warren.core.errors import WarrenError
from warren.receiving.errors import VerificationError
from warren.receiving.signatures import parse_signatures, verify_standard_webhook
from warren.topology.secrets import SigningSecrets, WebhookSecret
from warren.transport.signing import sign, signature_header

SECRET_TEXT = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SECRET = WebhookSecret(SECRET_TEXT)
NEW = WebhookSecret("whsec_" + base64.b64encode(b"the-new-secret-after-rotation!!!").decode())
OLD = WebhookSecret("whsec_" + base64.b64encode(b"the-old-secret-before-rotation!!").decode())
BODY = b'{"id":"msg_1","type":"order.paid","data":{"amount":42}}'
NOW = 1_700_000_000


def headers(signature: str, msg_id: str = "msg_1", timestamp: int | str = NOW) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature}


def reason(secrets: list[WebhookSecret], hdrs: dict[str, str], body: bytes = BODY, **kw: float) -> str:
    with pytest.raises(VerificationError) as caught:
        verify_standard_webhook(secrets, hdrs, body, now=kw.pop("now", NOW), **kw)
    return caught.value.reason


# --- accepted ---------------------------------------------------------------------------------------------
def test_a_valid_signature_returns_the_message_id() -> None:
    signature = sign(SECRET, "msg_1", NOW, BODY)
    assert verify_standard_webhook([SECRET], headers(signature), BODY, now=NOW) == "msg_1"


def test_header_names_are_case_insensitive() -> None:
    signature = sign(SECRET, "msg_1", NOW, BODY)
    upper = {"Webhook-Id": "msg_1", "WEBHOOK-TIMESTAMP": str(NOW), "Webhook-Signature": signature}
    assert verify_standard_webhook([SECRET], upper, BODY, now=NOW) == "msg_1"


def test_during_rotation_any_signature_matching_any_secret_is_enough() -> None:
    # Given a sender signing with the old and the new secret, and receivers at different stages of rotation
    header = signature_header(SigningSecrets((OLD, NEW)), "msg_1", NOW, BODY)
    # Then a receiver that knows only one of them, or both, accepts the request
    for secrets in ([OLD], [NEW], [NEW, OLD]):
        assert verify_standard_webhook(secrets, headers(header), BODY, now=NOW) == "msg_1"


def test_unknown_versions_and_malformed_entries_are_skipped() -> None:
    good = sign(SECRET, "msg_1", NOW, BODY)
    header = f"v1a,c29tZXRoaW5n v1,not-base64!! junk {good}"
    assert verify_standard_webhook([SECRET], headers(header), BODY, now=NOW) == "msg_1"


def test_timestamp_inside_the_tolerance_both_ways() -> None:
    for offset in (-299, 299):
        signature = sign(SECRET, "msg_1", NOW + offset, BODY)
        assert verify_standard_webhook([SECRET], headers(signature, timestamp=NOW + offset), BODY, now=NOW) == "msg_1"


# --- rejected -----------------------------------------------------------------------------------------------
def test_a_tampered_body_is_rejected() -> None:
    signature = sign(SECRET, "msg_1", NOW, BODY)
    assert reason([SECRET], headers(signature), BODY.replace(b"42", b"43")) == "no_matching_signature"


def test_a_changed_id_or_timestamp_is_rejected() -> None:
    signature = sign(SECRET, "msg_1", NOW, BODY)
    assert reason([SECRET], headers(signature, msg_id="msg_2")) == "no_matching_signature"
    assert reason([SECRET], headers(signature, timestamp=NOW + 1)) == "no_matching_signature"


def test_a_signature_by_another_secret_is_rejected() -> None:
    assert reason([SECRET], headers(sign(NEW, "msg_1", NOW, BODY))) == "no_matching_signature"


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_missing_headers_are_named(missing: str) -> None:
    hdrs = headers(sign(SECRET, "msg_1", NOW, BODY))
    del hdrs[missing]
    with pytest.raises(VerificationError, match=missing) as caught:
        verify_standard_webhook([SECRET], hdrs, BODY, now=NOW)
    assert caught.value.reason == "missing_headers"


def test_old_new_and_unreadable_timestamps() -> None:
    def at(ts: int) -> dict[str, str]:
        return headers(sign(SECRET, "msg_1", ts, BODY), timestamp=ts)

    assert reason([SECRET], at(NOW - 301)) == "timestamp_too_old"
    assert reason([SECRET], at(NOW + 301)) == "timestamp_too_new"
    assert reason([SECRET], headers("v1,abc=", timestamp="yesterday")) == "bad_timestamp"


def test_the_tolerance_is_configurable() -> None:
    hdrs = headers(sign(SECRET, "msg_1", NOW - 60, BODY), timestamp=NOW - 60)
    assert reason([SECRET], hdrs, tolerance=30) == "timestamp_too_old"
    assert verify_standard_webhook([SECRET], hdrs, BODY, now=NOW, tolerance=90) == "msg_1"


def test_a_header_without_any_v1_signature() -> None:
    assert reason([SECRET], headers("v2,abc v1a,xyz")) == "no_v1_signature"


def test_the_error_is_a_warren_error_and_never_shows_the_expected_signature() -> None:
    expected = sign(SECRET, "msg_1", NOW, BODY).split(",")[1]
    with pytest.raises(WarrenError) as caught:
        verify_standard_webhook([SECRET], headers("v1,AAAA"), BODY, now=NOW)
    assert expected not in str(caught.value)


def test_parse_signatures_keeps_only_decodable_v1_entries() -> None:
    assert parse_signatures("v1,AAAA v1a,AAAA v1 v1,%%%% v1,AQID") == [b"\x00\x00\x00", b"\x01\x02\x03"]


# --- interop with the standardwebhooks package ------------------------------------------------------------------
def test_what_warren_signs_verifies_in_standardwebhooks() -> None:
    # Given a request signed by Warren with the current time
    now = int(time.time())
    hdrs = headers(signature_header(SigningSecrets((SECRET,)), "msg_interop", now, BODY), "msg_interop", now)
    # When the independent implementation verifies it, Then it accepts and parses the body
    assert Webhook(SECRET_TEXT).verify(BODY, hdrs) == {"id": "msg_1", "type": "order.paid", "data": {"amount": 42}}


def test_what_warren_signs_during_rotation_verifies_in_standardwebhooks_with_either_secret() -> None:
    now = int(time.time())
    hdrs = headers(signature_header(SigningSecrets((OLD, NEW)), "msg_rot", now, BODY), "msg_rot", now)
    for secret in (OLD, NEW):
        Webhook(secret.reveal()).verify(BODY, hdrs)


def test_standardwebhooks_rejects_what_warren_signed_with_another_secret() -> None:
    now = int(time.time())
    hdrs = headers(sign(NEW, "msg_x", now, BODY), "msg_x", now)
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET_TEXT).verify(BODY, hdrs)


def test_what_standardwebhooks_signs_verifies_in_warren() -> None:
    # Given a request signed by the independent implementation
    now = int(time.time())
    signature = Webhook(SECRET_TEXT).sign("msg_theirs", datetime.fromtimestamp(now, tz=UTC), BODY.decode())
    # When Warren verifies it, Then it accepts it and returns its id
    assert verify_standard_webhook([SECRET], headers(signature, "msg_theirs", now), BODY) == "msg_theirs"


def test_standardwebhooks_and_warren_produce_the_same_signature() -> None:
    ts = datetime.fromtimestamp(NOW, tz=UTC)
    assert Webhook(SECRET_TEXT).sign("msg_same", ts, BODY.decode()) == sign(SECRET, "msg_same", NOW, BODY)


def test_a_body_tampered_after_standardwebhooks_signed_it_is_rejected_by_warren() -> None:
    now = int(time.time())
    signature = Webhook(SECRET_TEXT).sign("msg_t", datetime.fromtimestamp(now, tz=UTC), BODY.decode())
    with pytest.raises(VerificationError):
        verify_standard_webhook([SECRET], headers(signature, "msg_t", now), BODY + b" ")


@pytest.mark.parametrize(
    "written",
    [
        "".join(chr(0x0660 + int(d)) for d in str(NOW)),  # Arabic-indic digits: int() read them as NOW
        f"+{NOW}",
        f"{NOW:_}",
        f"\u2003{NOW}",  # an EM SPACE, which str.strip() removed
        "9" * 5000,  # beyond int()'s 4300 digits
    ],
)
def test_a_timestamp_is_ascii_digits_even_when_signed_as_written(written: str) -> None:
    # Given a request signed over a timestamp written another way than ASCII digits (the signer signs the text)
    hdrs = headers(sign(SECRET, "msg_1", written, BODY), timestamp=written)  # type: ignore[arg-type]
    # Then it is refused as a bad timestamp, never read as a moment
    assert reason([SECRET], hdrs) == "bad_timestamp"
