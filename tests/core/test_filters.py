"""Payload filters (warren/core/filters.py): every operator, missing paths, JSON's kinds, the bounds, the refusals."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

from warren.core.filters import (
    MAX_BYTES,
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_LIST,
    MISSING,
    EventFilter,
    FilterError,
    event_data,
)

ORDER = {
    "amount": 1500,
    "currency": "eur",
    "region": "eu",
    "paid": True,
    "note": None,
    "at": "2026-03-01T10:00:00Z",
    "tags": ["urgent", "gift"],
    "scores": [3, 9],
    "customer": {"tier": "gold", "address": {"country": "FR"}},
    "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-2", "qty": 1}],
    "dotted.key": 1,
}


def passes(source: Any, data: Any = ORDER) -> bool:
    return EventFilter(source).matches(data)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # equality: a literal, $eq, $neq; numbers by value, kinds apart
        ({"region": "eu"}, True),
        ({"region": "us"}, False),
        ({"amount": 1500.0}, True),
        ({"paid": True}, True),
        ({"paid": 1}, False),  # true is not 1
        ({"amount": True}, False),
        ({"note": None}, True),
        ({"region": {"$eq": "eu"}}, True),
        ({"region": {"$neq": "eu"}}, False),
        ({"region": {"$neq": "us"}}, True),
        ({"customer": {"$eq": {"tier": "gold", "address": {"country": "FR"}}}}, True),  # a whole object
        ({"customer": {"$eq": {"tier": "gold"}}}, False),
        ({"customer": {"$eq": {"tier": "bronze", "address": {"country": "FR"}}}}, False),
        ({"customer": {"$eq": {"tier": "silver", "address": {"country": "FR"}}}}, False),
        ({"customer": {"$eq": {"tier": "gold", "address": {"country": "FR"}, "since": 2020}}}, False),
        ({"scores": {"$eq": [3]}}, False),  # a shorter array is another array
        ({"scores": {"$eq": [3, 9, 1]}}, False),
        ({"amount": 2000}, False),
        ({"paid": {"$in": [True]}}, True),
        ({"paid": {"$in": [False, None]}}, False),
        ({"scores": [3, 9]}, True),  # a whole array
        ({"scores": [9, 3]}, False),
        # an array matches by any element (equality, comparisons, $in); $neq and $nin need none to
        ({"tags": "urgent"}, True),
        ({"tags": {"$neq": "urgent"}}, False),
        ({"tags": {"$neq": "spam"}}, True),
        ({"scores": {"$gt": 5}}, True),
        ({"scores": {"$gt": 10}}, False),
        ({"tags": {"$in": ["gift", "x"]}}, True),
        ({"tags": {"$nin": ["gift", "x"]}}, False),
        # comparisons: numbers with numbers, strings with strings (ISO times in order); other kinds false
        ({"amount": {"$gt": 1000}}, True),
        ({"amount": {"$gt": 1500}}, False),
        ({"amount": {"$gte": 1500}}, True),
        ({"amount": {"$lt": 1500}}, False),
        ({"amount": {"$lte": 1500}}, True),
        ({"amount": {"$gte": 1000, "$lt": 2000}}, True),
        ({"amount": {"$gte": 1000, "$lt": 1200}}, False),
        ({"at": {"$gte": "2026-01-01T00:00:00Z"}}, True),
        ({"at": {"$lt": "2026-01-01T00:00:00Z"}}, False),
        ({"region": {"$gt": 5}}, False),  # a string against a number
        ({"amount": {"$gt": "1000"}}, False),  # a number against a string
        ({"paid": {"$gt": 0}}, False),  # a boolean is not a number
        ({"note": {"$lt": 1}}, False),
        ({"customer": {"$gt": 1}}, False),
        # $in, $nin
        ({"region": {"$in": ["eu", "uk"]}}, True),
        ({"region": {"$in": ["us"]}}, False),
        ({"region": {"$in": []}}, False),
        ({"region": {"$nin": ["us"]}}, True),
        ({"region": {"$nin": ["eu"]}}, False),
        ({"amount": {"$in": [1500.0]}}, True),
        ({"paid": {"$in": [1]}}, False),
        ({"note": {"$in": [None]}}, True),
        ({"customer": {"$in": ["gold"]}}, False),  # an object is in no list of scalars
        # $exist: null is there; a path through a scalar is not
        ({"note": {"$exist": True}}, True),
        ({"deleted_at": {"$exist": False}}, True),
        ({"deleted_at": {"$exist": True}}, False),
        ({"region.x": {"$exist": False}}, True),
        # paths: dotted, nested objects, array indices; one nested level is a condition on that value
        ({"customer.tier": "gold"}, True),
        ({"customer": {"tier": "gold"}}, True),
        ({"customer": {"address.country": "FR", "tier": "gold"}}, True),
        ({"customer": {"address": {"country": "DE"}}}, False),
        ({"items.1.sku": "b-2"}, True),
        ({"items.2.sku": {"$exist": False}}, True),
        ({"items.5.sku": {"$exist": False}}, True),
        ({"items.sku": "a-1"}, False),  # no implicit walk through arrays: index them
        ({"dotted.key": 1}, False),  # a key with a dot cannot be named: it is a path
        # $and, $or, $not
        ({"$and": [{"region": "eu"}, {"amount": {"$gt": 1000}}]}, True),
        ({"$and": [{"region": "eu"}, {"amount": {"$gt": 9000}}]}, False),
        ({"$or": [{"region": "us"}, {"amount": {"$gt": 1000}}]}, True),
        ({"$or": [{"region": "us"}, {"amount": {"$gt": 9000}}]}, False),
        ({"$not": {"region": "eu"}}, False),
        ({"$not": {"region": "us"}}, True),
        ({"region": {"$not": {"$in": ["us", "ca"]}}}, True),
        ({"region": {"$not": "eu"}}, False),
        ({"customer": {"$not": {"tier": "silver"}}}, True),
        ({"$or": [{"$and": [{"region": "eu"}, {"$not": {"paid": False}}]}, {"region": "us"}]}, True),
    ],
)
def test_each_operator_on_an_order(source: Any, expected: bool) -> None:
    assert passes(source) is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"region": "eu"}, False),
        ({"region": {"$neq": "eu"}}, False),
        ({"region": {"$nin": ["eu"]}}, False),
        ({"region": {"$gt": "a"}}, False),
        ({"region": {"$exist": True}}, False),
        ({"region": {"$exist": False}}, True),
        ({"region": {"$not": "eu"}}, True),  # $not negates what it holds, so a missing path passes it
        ({"$not": {"region": "eu"}}, True),
        ({"region": {"$not": {"$exist": True}}}, True),
    ],
)
def test_a_missing_path_fails_every_operator_but_exist_false_and_not(source: Any, expected: bool) -> None:
    # Given data without the path, a data that is not an object, and no data at all
    for data in ({"other": 1}, [1, 2], "text", None, MISSING):
        # Then the result is the defined one, never an error
        assert passes(source, data) is expected, data


def test_the_filter_applies_to_the_events_data() -> None:
    body = orjson.dumps({"id": "e1", "type": "order.paid", "timestamp": "t", "data": {"amount": 1200}})
    assert EventFilter({"amount": {"$gt": 1000}}).matches(event_data(body))
    assert event_data(orjson.dumps({"id": "e1", "data": None})) is None
    # A body that is not an envelope with data: MISSING, for callers to let through (dead-lettered as malformed)
    for body in (b"not json", b"[1]", b'{"id": "e1"}'):
        assert event_data(body) is MISSING


@pytest.mark.parametrize(
    ("source", "where", "says"),
    [
        ([{"region": "eu"}], "", "a filter is a JSON object, not a list"),
        ("region = eu", "", "a filter is a JSON object, not a string"),
        ({"amount": {"$gt": True}}, "amount.$gt", "takes a number or a string, not a boolean"),
        ({"amount": {"$gte": [1]}}, "amount.$gte", "takes a number or a string, not a list"),
        ({"amount": {"$lt": None}}, "amount.$lt", "takes a number or a string, not null"),
        ({"region": {"$in": "eu"}}, "region.$in", "takes a list"),
        ({"region": {"$nin": [["eu"]]}}, "region.$nin[0]", "not a list"),
        ({"region": {"$in": list(range(MAX_LIST + 1))}}, "region.$in", f"at most {MAX_LIST}"),
        ({"region": {"$exist": "yes"}}, "region.$exist", "takes true or false"),
        ({"region": {"$ne": "eu"}}, "region.$ne", "did you mean $neq?"),
        ({"region": {"$exists": True}}, "region.$exists", "did you mean $exist?"),
        ({"region": {"$regex": "^e"}}, "region.$regex", "unknown operator $regex"),
        ({"region": {"$eq": "eu", "x": 1}}, "region", "either operators ($...) or fields, not both"),
        ({"region": {}}, "region", "an empty object"),
        ({"$or": []}, "$or", "non-empty list of conditions"),
        ({"$and": {"region": "eu"}}, "$and", "non-empty list of conditions"),
        ({"$and": [{"region": "eu"}, "x"]}, "$and[1]", "a condition is an object, not a string"),
        ({"$not": {}}, "$not", "an empty condition"),
        ({"$nor": [{"region": "eu"}]}, "$nor", "did you mean $not with $or?"),
        ({"$and": [{"x": {"$gt": 1, "$in": [{"a": 1}]}}]}, "$and[0].x.$in[0]", "not an object"),
        ({"customer": {"$or": [{"tier": "gold"}]}}, "customer.$or", "unknown operator $or"),
        ({"a..b": 1}, "a..b", "no empty segment"),
        ({".a": 1}, ".a", "no empty segment"),
        ({"a": float("inf")}, "a", "numbers are finite"),
        ({"a": {"$eq": {1: "x"}}}, "a.$eq", "object keys are strings"),
        ({"at": {"$gt": time}}, "at.$gt", "takes JSON values: not a JSON value (module)"),
    ],
)
def test_a_bad_filter_is_refused_naming_the_place(source: Any, where: str, says: str) -> None:
    with pytest.raises(FilterError) as refused:
        EventFilter(source)
    assert refused.value.where == where
    assert says in str(refused.value)
    assert str(refused.value).startswith(f"{where}: " if where else says[:10])


def test_the_bounds_are_the_documented_ones() -> None:
    assert (MAX_BYTES, MAX_DEPTH, MAX_CONDITIONS, MAX_LIST) == (8192, 16, 128, 256)  # docs/endpoints.md


def test_the_bounds_are_enforced() -> None:
    # Nesting: MAX_DEPTH levels of objects pass, one more is refused where it goes too deep
    deep: Any = "x"
    for _ in range(MAX_DEPTH):
        deep = {"a": deep}
    assert EventFilter(deep).matches(_data_path(MAX_DEPTH, "x"))
    with pytest.raises(FilterError, match=f"at most {MAX_DEPTH} levels"):
        EventFilter({"a": deep})
    # A literal nested deeply counts too (and a document a thousand levels deep is refused, not a RecursionError)
    with pytest.raises(FilterError, match="levels"):
        EventFilter({"a": {"$eq": orjson.loads(b"[" * 1000 + b"]" * 1000)}})
    # Conditions
    EventFilter({f"k{i}": i for i in range(MAX_CONDITIONS)})
    with pytest.raises(FilterError, match=f"at most {MAX_CONDITIONS} conditions"):
        EventFilter({f"k{i}": i for i in range(MAX_CONDITIONS + 1)})
    # A $not counts what it holds, not itself
    EventFilter({f"k{i}": {"$not": i} for i in range(MAX_CONDITIONS)})
    with pytest.raises(FilterError, match=f"at most {MAX_CONDITIONS} conditions"):
        EventFilter({f"k{i}": {"$not": i} for i in range(MAX_CONDITIONS + 1)})
    # A list of $in: MAX_LIST values, not one more
    EventFilter({"k": {"$in": list(range(MAX_LIST))}})
    # Size: the compact JSON, to the byte
    room = MAX_BYTES - len('{"note":""}')
    assert len(EventFilter({"note": "x" * room}).text) == MAX_BYTES
    with pytest.raises(FilterError, match=f"at most {MAX_BYTES} bytes"):
        EventFilter({"note": "x" * (room + 1)})


def _data_path(levels: int, leaf: Any) -> Any:
    for _ in range(levels):
        leaf = {"a": leaf}
    return leaf


class Counted(list[Any]):
    """A JSON array that counts the elements evaluation reads from it."""

    reads = 0

    def __iter__(self) -> Any:
        for item in super().__iter__():
            Counted.reads += 1
            yield item


def test_evaluation_reads_each_value_at_most_once_per_condition() -> None:
    # Given the largest filter of conditions on arrays, ORed under a $not, against events of long arrays (the worst
    # case: no element matches, so every condition runs and looks at every element)
    conditions: list[Any] = [{f"k{i}": {"$in": ["a", "b"]}} for i in range(MAX_CONDITIONS // 2)]
    conditions += [{f"n{i}": {"$gt": 5}} for i in range(MAX_CONDITIONS // 2)]
    compiled = EventFilter({"$not": {"$or": conditions}})
    for length in (10, 1_000, 10_000):
        data = {f"k{i}": Counted(["x"] * length) for i in range(MAX_CONDITIONS // 2)}
        data |= {f"n{i}": Counted([1] * length) for i in range(MAX_CONDITIONS // 2)}
        Counted.reads = 0
        # When it is evaluated
        assert compiled.matches(data)  # no condition of the $or holds
        # Then each element was read once, by its one condition: the cost is linear in the event
        assert Counted.reads == MAX_CONDITIONS * length


def test_equal_filters_are_equal_and_hash_alike_and_keep_their_source() -> None:
    a = EventFilter({"region": "eu", "amount": {"$gt": 1}})
    b = EventFilter({"amount": {"$gt": 1}, "region": "eu"})
    assert a == b and hash(a) == hash(b) and a != EventFilter({"region": "eu"})
    assert list(a.source) == ["region", "amount"]  # as given
    assert repr(a) == 'EventFilter({"amount":{"$gt":1},"region":"eu"})'
    # The source shown is a copy: changing it changes nothing the filter does
    a.source["region"] = "us"
    assert a.matches({"region": "eu", "amount": 2})
