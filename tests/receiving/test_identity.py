"""Reading the event id, ordering key and sequence from a request, as each source's configuration says."""

from __future__ import annotations

from typing import Any

import pytest

from warren.receiving.errors import IdentityError
from warren.receiving.identity import SOURCE_WIDE_KEY, Identity, field_at, identify
from warren.topology.config import InboundSource


def source(**fields: Any) -> InboundSource:
    return InboundSource.model_validate({"name": "src", "handler": "m:f", "verifier": "none", **fields})


def test_id_from_a_header_any_case() -> None:
    s = source(id_header="X-GitHub-Delivery")
    assert identify(s, {"x-github-delivery": "72d3162e"}, b"not json") == Identity("72d3162e")


def test_standard_webhooks_takes_webhook_id_by_default() -> None:
    s = InboundSource.model_validate(
        {
            "name": "w",
            "handler": "m:f",
            "verifier": "standard-webhooks",
            "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        }
    )
    assert identify(s, {"webhook-id": "msg_1"}, b"{}").id == "msg_1"


def test_id_key_and_sequence_from_json_fields() -> None:
    s = source(id_field="event.id", key_field="event.order", sequence_field="event.version")
    body = b'{"event": {"id": 981, "order": "o-7", "version": 12}}'
    assert identify(s, {}, body) == Identity("981", "o-7", 12)


def test_a_sequence_without_a_key_field_orders_the_whole_source() -> None:
    # Telegram's update_id is both the id and a source-wide sequence.
    s = source(id_field="update_id", sequence_field="update_id")
    assert identify(s, {}, b'{"update_id": 5001}') == Identity("5001", SOURCE_WIDE_KEY, 5001)


def test_a_missing_key_or_sequence_leaves_them_unset() -> None:
    s = source(id_field="id", key_field="order", sequence_field="seq")
    assert identify(s, {}, b'{"id": "e1"}') == Identity("e1")


@pytest.mark.parametrize(
    ("fields", "headers", "body", "message"),
    [
        ({"id_header": "X-Id"}, {}, b"{}", "missing header X-Id"),
        ({"id_field": "id"}, {}, b"{}", "no field 'id'"),
        ({"id_field": "id"}, {}, b"<xml/>", "not JSON"),
        ({"id_field": "id"}, {}, b'{"id": ""}', "1-200 bytes"),
        ({"id_field": "id"}, {}, b'{"id": {"nested": 1}}', "string or an integer"),
        ({"id_field": "id"}, {}, b'{"id": true}', "string or an integer"),
        ({"id_field": "id", "sequence_field": "seq"}, {}, b'{"id": "a", "seq": "7"}', "must be an integer"),
    ],
)
def test_what_cannot_be_read_is_said(
    fields: dict[str, str], headers: dict[str, str], body: bytes, message: str
) -> None:
    with pytest.raises(IdentityError, match=message):
        identify(source(**fields), headers, body)


def test_an_id_too_long_for_a_message_id() -> None:
    with pytest.raises(IdentityError):
        identify(source(id_header="X-Id"), {"X-Id": "x" * 201}, b"")


def test_field_at_walks_objects_and_lists() -> None:
    document = {"a": {"b": [{"c": 1}, {"c": 2}]}}
    assert field_at(document, "a.b.1.c") == 2
    with pytest.raises(KeyError):
        field_at(document, "a.b.5.c")


def test_a_body_with_a_duplicate_key_has_no_identity() -> None:
    # {"update_id": 1, "update_id": 2}: which one is the id depends on the parser; refuse instead of guessing
    s = source(id_field="update_id")
    with pytest.raises(IdentityError, match="duplicate key 'update_id'"):
        identify(s, {}, b'{"update_id": 1, "update_id": 2}')


@pytest.mark.parametrize("index", ["\u00b9", "\u0661", "\uff11", "1" * 5000, "-1", "+1"])
def test_a_list_index_in_a_path_is_ascii_digits(index: str) -> None:
    # SUPERSCRIPT ONE passed isdigit() and int() raised ValueError (a 500 on every request); ARABIC-INDIC DIGIT
    # ONE and FULLWIDTH DIGIT ONE were read as 1
    with pytest.raises(KeyError):
        field_at({"a": ["zero", "one"]}, f"a.{index}")


@pytest.mark.parametrize("sequence", [2**63, 2**64 - 1, -(2**63)])
def test_a_sequence_an_amqp_header_cannot_hold_is_refused(sequence: int) -> None:
    # orjson reads integers up to 2^64 - 1; publishing one over 2^63 - 1 raised TypeError in the receiver (a 500)
    s = source(id_field="id", sequence_field="seq")
    with pytest.raises(IdentityError, match="must be an integer within"):
        identify(s, {}, b'{"id": "a", "seq": %d}' % sequence)
