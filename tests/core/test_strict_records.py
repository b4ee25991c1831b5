"""Records off RabbitMQ read through a strict pydantic type: a value is taken only as what it is in JSON."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, TypeAdapter

from warren.core.errors import WarrenError
from warren.core.strict_records import MalformedRecord, Number, Text, Whole, read, shown


class Inner(BaseModel):
    name: Text


class Record(BaseModel):
    text: Text = "t"
    whole: Whole = 1
    number: Number = 1.0
    maybe: Number | None = None
    inner: list[Inner] = []


READER = TypeAdapter(Record)


def refused(body: bytes) -> MalformedRecord:
    with pytest.raises(MalformedRecord) as caught:
        read(READER, body)
    return caught.value


def test_a_record_reads_with_its_defaults_and_ignores_other_keys() -> None:
    assert read(READER, b'{"whole": 7, "number": 2, "other": [1, {"x": null}]}') == Record(whole=7, number=2.0)
    assert isinstance(read(READER, b'{"number": 2}').number, float)  # an integer is a number, read as a float


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # What pydantic's lax mode would take: a string of digits, a boolean, a whole float
        (b'{"whole": "3"}', "field 'whole': expected int"),
        (b'{"whole": true}', "field 'whole': expected int"),
        (b'{"whole": 3.0}', "field 'whole': expected int"),
        (b'{"number": "1.5"}', "field 'number': expected int/float"),
        (b'{"number": true}', "field 'number': expected int/float"),
        (b'{"maybe": false}', "field 'maybe': expected int/float"),
        (b'{"text": 5}', "field 'text': expected str"),
        (b'{"text": null}', "field 'text': expected str"),
        (b'{"text": ["a"]}', "field 'text': expected str"),
        # An integer beyond 64 bits: orjson reads it as a float, which an integer field refuses
        (b'{"whole": 18446744073709551616}', "field 'whole': expected int"),
        # Where the value is nested, the message says where
        (b'{"inner": [{"name": "a"}, {"name": 1}]}', "field 'inner[1].name': expected str"),
        (b'{"inner": [{}]}', "field 'inner[0].name': missing"),
        (b'{"inner": ["a"]}', "field 'inner[0]': not a JSON object"),
        (b'{"inner": {}}', "field 'inner': expected a list"),
    ],
)
def test_a_value_is_taken_only_as_what_it_is(body: bytes, message: str) -> None:
    assert str(refused(body)) == message


@pytest.mark.parametrize(
    "body",
    [
        b'{"number": NaN}',
        b'{"number": Infinity}',
        b'{"number": -Infinity}',
        b'{"number": 1e400}',  # beyond a double: orjson says "number is infinity"
        b'{"whole": 1' + b"0" * 400 + b"}",
        b'{"text": "\\ud800"}',  # a lone surrogate
        b'{"inner": ' + b"[" * 1100 + b"]" * 1100 + b"}",  # deeper than orjson reads (1,024)
        b'{"text": "a"',
        b"\xff",
    ],
)
def test_what_orjson_refuses_is_not_json(body: bytes) -> None:
    assert str(refused(body)).startswith("not JSON: ")


@pytest.mark.parametrize("body", [b"[]", b'"text"', b"1", b"null", b"true"])
def test_a_record_is_an_object(body: bytes) -> None:
    assert str(refused(body)) == "not a JSON object"


def test_a_deep_value_is_refused_without_printing_it() -> None:
    # 1,020 levels: orjson reads them, and a repr of them raises RecursionError
    deep = b"[" * 1020 + b"]" * 1020
    error = refused(b'{"text": ' + deep + b"}")
    assert str(error) == "field 'text': expected str" and error.where == ("text",)


def test_the_error_is_a_value_error_and_a_warren_error() -> None:
    error = refused(b'{"whole": "3"}')
    assert isinstance(error, ValueError) and isinstance(error, WarrenError)
    assert (error.where, error.reason, error.value) == (("whole",), "expected int", "3")


def test_a_value_in_a_message_is_clipped_and_a_container_never_printed() -> None:
    assert shown("won") == "'won'"
    assert shown("x" * 1000) == repr("x" * 59 + "…")
    assert (shown(None), shown(True), shown(3), shown(1.5)) == ("None", "True", "3", "1.5")
    assert (shown([[[]]]), shown({"a": 1})) == ("[...]", "{...}")
