"""Pure parts of the DLQ tools: reading a dead letter, filters, the replay copy's headers, the shovel."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from decimal import Decimal

import orjson
import pytest
from rich.console import Console

from tests.support.deep_json import nested
from warren.broker import wire
from warren.broker.dlq.browse import _version as broker_version
from warren.broker.dlq.browse import holds_enough
from warren.broker.dlq.letters import dead_letter_from, format_ms, json_safe
from warren.broker.dlq.move import replay_headers
from warren.broker.dlq.selection import Selection, parse_moment, select
from warren.broker.dlq.shovel import shovel_definition, shovel_name
from warren.commands.dlq_render import WIDE, letter_detail, letters_table, moves_table, type_counts
from warren.core.visible import visible

HEADERS = {
    wire.H_KEY: "acct-1",
    wire.H_ATTEMPT: 3,
    wire.H_FIRST_ATTEMPT: 1_700_000_000_000,
    wire.H_LAST_ATTEMPT: 1_700_000_005_000,
    wire.H_DEAD_AT: 1_700_000_005_100,
    wire.H_LAST_STATUS: 503,
    wire.H_LAST_ERROR: "HTTP 503",
    wire.H_DEAD_REASON: "max_attempts (3) reached; last: HTTP 503",
    wire.H_ENDPOINT: "acme",
    wire.H_HISTORY: orjson.dumps([{"at": 1_700_000_000_000, "status": 503, "ms": 12}]).decode(),
    "x-delivery-count": 2,
}
BODY = orjson.dumps({"id": "evt_1", "type": "order.paid", "timestamp": "2024-01-01T00:00:00Z", "data": {}})


def test_a_dead_letter_reads_its_story_from_the_headers() -> None:
    letter = dead_letter_from(4, BODY, HEADERS, "evt_1", "order.paid")
    assert (letter.position, letter.event_id, letter.event_type, letter.key) == (4, "evt_1", "order.paid", "acct-1")
    assert (letter.attempts, letter.last_status, letter.last_error) == (3, 503, "HTTP 503")
    assert letter.dead_ms == 1_700_000_005_100 and letter.endpoint == "acme"
    assert letter.history == ({"at": 1_700_000_000_000, "status": 503, "ms": 12},)
    summary = letter.summary()
    assert summary["dead_at"] == "2023-11-14T22:13:25.100Z" and summary["first_attempt"] == "2023-11-14T22:13:20.000Z"
    whole = letter.whole()
    assert whole["envelope"]["id"] == "evt_1" and whole["headers"]["x-delivery-count"] == 2


def test_a_malformed_message_is_listed_with_what_can_be_read() -> None:
    letter = dead_letter_from(0, b"not json", {wire.H_DEAD_REASON: b"malformed message: body is not JSON"}, None, None)
    assert (letter.event_id, letter.event_type, letter.attempts) == ("?", "?", None)
    assert letter.dead_reason == "malformed message: body is not JSON"
    assert letter.whole()["envelope"] == {"raw": "not json"}
    binary = dead_letter_from(0, b"\x00\xff", {}, "m1", None)
    assert "base64" in binary.whole()["envelope"]


def test_header_values_become_plain_json() -> None:
    moment = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    value = {"a": b"bytes", "b": Decimal("1.5"), "c": [moment, {"d": b"x"}]}
    assert json_safe(value) == {"a": "bytes", "b": 1.5, "c": ["2024-01-01T00:00:00+00:00", {"d": "x"}]}
    assert format_ms(None) is None


def test_moments_are_iso_times_or_durations_ago() -> None:
    now = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    noon_ms = round(now.timestamp() * 1000)
    assert parse_moment("15m", now) == noon_ms - 15 * 60_000
    assert parse_moment("2024-05-01T11:00:00Z", now) == noon_ms - 3_600_000
    assert parse_moment("2024-05-01T11:00:00", now) == noon_ms - 3_600_000  # naive means UTC
    assert parse_moment("2024-05-01T13:00:00+02:00", now) == noon_ms - 3_600_000
    with pytest.raises(ValueError, match="neither an ISO 8601 time"):
        parse_moment("last tuesday", now)


def test_selection_filters_then_orders_then_limits() -> None:
    letters = [
        dead_letter_from(i, BODY, {**HEADERS, wire.H_DEAD_AT: 1000 * i}, f"e{i}", "a.x" if i % 2 else "b.y")
        for i in range(6)
    ]
    assert not Selection().narrows and Selection(limit=1).narrows and Selection(ids=frozenset({"e1"})).narrows
    assert [x.event_id for x in select(letters, Selection())] == [f"e{i}" for i in range(6)]
    assert [x.event_id for x in select(letters, Selection(types=("a.*",)))] == ["e1", "e3", "e5"]
    assert [x.event_id for x in select(letters, Selection(since_ms=2000, until_ms=4000))] == ["e2", "e3"]
    assert [x.event_id for x in select(letters, Selection(limit=2), newest_first=True)] == ["e5", "e4"]
    assert [x.event_id for x in select(letters, Selection(ids=frozenset({"e4", "zz"})))] == ["e4"]
    undated = dead_letter_from(0, BODY, {}, "u", "a.x")
    assert select([undated], Selection(since_ms=0)) == []


def test_a_replayed_copy_is_marked_and_sheds_broker_bookkeeping() -> None:
    headers = {**HEADERS, "x-death": [{}], "x-first-death-queue": "q", wire.H_SHOVELLED: [{}]}
    out = replay_headers(headers, 1234)
    assert out[wire.H_REPLAYED] == 1234
    assert not {"x-death", "x-first-death-queue", "x-delivery-count", wire.H_SHOVELLED} & set(out)
    assert out[wire.H_HISTORY] == HEADERS[wire.H_HISTORY] and out[wire.H_ATTEMPT] == 3


def test_the_shovel_moves_the_queue_length_once_confirmed_with_forward_headers() -> None:
    value = shovel_definition("/", "w.ep.acme.dlq", "w.ep.acme")
    assert value["src-uri"] == value["dest-uri"] == "amqp:///%2F"
    assert (value["src-queue"], value["dest-exchange"]) == ("w.ep.acme.dlq", "w.ep.acme")
    assert value["src-delete-after"] == "queue-length" and value["ack-mode"] == "on-confirm"
    assert value["dest-add-forward-headers"] is True
    first, second = shovel_name("w", "acme"), shovel_name("w", "acme")
    assert first.startswith("w.replay.acme.") and second.startswith("w.replay.acme.") and first != second
    assert shovel_name("w", "acme", "r1") == "w.replay.acme.r1"


def test_an_event_without_key_shows_no_key() -> None:
    # Warren's publisher puts the event id in the hash header when the event has no key: that is not a key
    letter = dead_letter_from(0, BODY, {wire.H_KEY: b"evt_1"}, "evt_1", "order.paid")
    assert letter.key is None


def test_a_letter_rabbitmq_dead_lettered_shows_rabbitmqs_reason_and_time() -> None:
    # Given a message the backstop route brought from a work queue that hit its delivery limit: no warren-*
    # dead-letter headers, only RabbitMQ's x-death (newest first; an earlier trip through a delay level after)
    died = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
    headers = {
        "x-death": [
            {"reason": "delivery_limit", "queue": "w.ep.acme.q", "time": died, "count": 1},
            {"reason": "expired", "queue": "w.delay.l03.q", "time": died - dt.timedelta(seconds=5), "count": 1},
        ],
        "x-first-death-reason": "expired",
    }
    letter = dead_letter_from(0, b'{"id": "e1", "type": "t"}', headers, "e1", "t")
    # Then the reason says what happened, where, and who did it; the time is the death's
    assert letter.dead_reason == "delivery_limit in w.ep.acme.q (dead-lettered by RabbitMQ)"
    assert letter.dead_ms == round(died.timestamp() * 1000)
    assert letter.summary()["dead_reason"] == letter.dead_reason
    # And Warren's own reason, when there is one, wins
    own = dead_letter_from(0, b"{}", {**headers, wire.H_DEAD_REASON: "exhausted"}, "e1", "t")
    assert own.dead_reason == "exhausted"


def test_an_old_letter_shows_no_credentials_from_a_url() -> None:
    # Given a letter written before URLs were redacted at the source, with a token in its error texts
    error = "ClientResponseError: 400, url='http://h.example/x?token=s3cret'"
    history = orjson.dumps([{"attempt": 1, "error": "invalid URL http://u:pa55@h.example/"}])
    headers = {wire.H_LAST_ERROR: error, wire.H_DEAD_REASON: error, wire.H_HISTORY: history}
    letter = dead_letter_from(0, b'{"id": "e", "type": "t"}', headers, "e", "t")
    # Then what `warren dlq list/show` print (tables and JSON) has neither secret
    console = Console(record=True, width=300, file=io.StringIO())
    console.print(letter_detail(letter, 1, 1))
    console.print(letters_table([letter], "dlq"))
    shown = orjson.dumps(letter.whole()).decode() + console.export_text()
    assert "token=***" in shown
    assert "s3cret" not in shown and "pa55" not in shown


@pytest.mark.parametrize(
    ("delivered", "reached_new", "want", "everything", "enough"),
    [
        (4, True, 5, 12, False),  # the caller's head has not arrived
        (5, True, 5, 12, True),  # the head, and a never-delivered message: everything given back before is held
        (5, False, 5, 12, False),  # the head lies in the part given back before: its tail is still queued ahead
        (11, False, 5, 12, False),
        (12, False, 5, 12, True),  # the whole queue (up to the scan cap) is held
    ],
)
def test_a_pass_holds_the_whole_part_given_back_before(
    delivered: int, reached_new: bool, want: int, everything: int, enough: bool
) -> None:
    assert holds_enough(delivered, reached_new, want, everything) is enough


def test_control_characters_from_a_message_are_printed_as_escapes() -> None:
    # Given a raw message whose id, type, key and error hold an escape sequence, a BEL, a newline and a bidi override
    headers = {wire.H_KEY: "k\u202eyek", wire.H_LAST_ERROR: "oops\x1b[31m red", "x-\x07name": "v\x9bw"}
    letter = dead_letter_from(0, b"not json", headers, "bad\x1b[2Jid\x07", "a.x\nb.y")
    # When each view of `warren dlq` renders it, wide and narrow
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    for width in (WIDE, 80):
        console.print(letters_table([letter], "dlq", width))
        console.print(moves_table([letter], "dlq", width))
    console.print(letter_detail(letter, 1, 1))
    console.print(type_counts([letter]))
    printed = out.getvalue()
    # Then no control character reaches the terminal, and each is shown as its escape
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]", printed), repr(printed)
    for shown in ("bad\\x1b[2Jid\\x07", "a.x\\nb.y", "k\\u202eyek", "oops\\x1b[31m", "x-\\x07name", "v\\x9bw"):
        assert shown in printed, shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("msg_1 order.paid", "msg_1 order.paid"),
        ("é ü 中 🦊 \\x07", "é ü 中 🦊 \\x07"),  # printable text, a literal backslash included, stays as it is
        ("a\tb\nc\rd", "a\\tb\\nc\\rd"),
        ("\x00\x1b\x7f\x85\x9f", "\\x00\\x1b\\x7f\\x85\\x9f"),
        ("\u2028\u2029\u202a\u202e\u2066\u2069", "\\u2028\\u2029\\u202a\\u202e\\u2066\\u2069"),
    ],
)
def test_visible_writes_every_unsafe_character_as_an_escape(text: str, shown: str) -> None:
    assert visible(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "999999999d",  # that long ago is before year 1: the recovery ran, then printing the moment raised
        "9" * 400 + "s",  # float() read it as inf: round() raised OverflowError
        "0001-01-01T00:00:00+01:00",  # year 0 in UTC
        "9999-12-31T23:59:59-01:00",  # year 10000 in UTC
        "\u0663m",  # ARABIC-INDIC DIGIT THREE
    ],
)
def test_a_moment_no_date_holds_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_moment(text, dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC))


@pytest.mark.parametrize("ms", [10**15, -(10**15), 2**63 - 1, -(2**63)])
def test_a_header_time_no_date_holds_is_listed_as_unknown(ms: int) -> None:
    # Given a letter whose time headers hold numbers no date has (a raw AMQP client can write any)
    headers = {**HEADERS, wire.H_DEAD_AT: ms, wire.H_FIRST_ATTEMPT: ms, wire.H_ATTEMPT: "\u0663"}
    letter = dead_letter_from(0, BODY, headers, "e1", "a.x")
    # Then it is read and shown with those times unknown (fromtimestamp raised ValueError or OverflowError)
    assert format_ms(ms) is None
    assert (letter.summary()["dead_at"], letter.summary()["first_attempt"], letter.attempts) == (None, None, None)
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(letters_table([letter], "dlq", WIDE))
    console.print(letter_detail(letter, 1, 1))


@pytest.mark.parametrize(
    ("text", "version"),
    [("3.10.8", (3, 10)), ("4.0.5", (4, 0)), ("4.1.0-beta.1", (4, 1)), ("4\u00b2.0", (4, 0)), (None, (0,))],
)
def test_the_broker_version_is_read_from_ascii_digits(text: object, version: tuple[int, ...]) -> None:
    assert broker_version(text) == version  # "4²" passed isdigit() and int() raised


def test_a_letter_deeper_than_json_is_written_and_byte_array_headers_are_shown() -> None:
    # Given a dead letter whose body orjson reads but nobody writes back (1,000 levels: the worker dead-letters
    # such a body when it repeats a key), and headers holding bytes and a byte array
    body = b'{"id": "e1", "type": "a.x", "data": ' + nested(1000) + b', "id": "e2"}'
    headers = {**HEADERS, "x-bytes": bytearray(b"\xff"), "x-odd": b"\xc3"}
    letter = dead_letter_from(0, body, headers, "e1", "a.x")
    # Then `dlq show --json` and `dlq show` print it (RecursionError, and TypeError for the byte array, before)
    whole = letter.whole()
    assert whole["envelope"] == {"raw": body.decode()}
    assert (whole["headers"]["x-bytes"], whole["headers"]["x-odd"]) == ("\ufffd", "\ufffd")
    json.dumps(whole, indent=2, ensure_ascii=False)
    Console(file=io.StringIO(), width=200, color_system=None).print(letter_detail(letter, 1, 1))
