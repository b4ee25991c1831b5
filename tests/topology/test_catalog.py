"""The event-type catalog, pure: which schema an event is checked against, what a violation says, what the
file accepts, and the exports."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from warren.topology.catalog import Catalog, EventTypeSpec, asyncapi_document, json_schema_bundle
from warren.topology.config import WarrenConfig

ORDER = {
    "type": "object",
    "required": ["amount", "items"],
    "properties": {
        "amount": {"type": "number", "minimum": 0},
        "items": {"type": "array", "items": {"type": "object", "required": ["sku"]}},
    },
}


def spec(name: str = "order.paid", version: int = 1, schema: Any = ORDER, **fields: Any) -> EventTypeSpec:
    return EventTypeSpec.model_validate({"name": name, "version": version, "json_schema": schema, **fields})


def test_a_violation_names_the_path_of_the_first_error() -> None:
    catalog = Catalog((spec(),))
    assert catalog.violation("order.paid", {"amount": 3, "items": [{"sku": "a"}]}) is None
    missing = catalog.violation("order.paid", {"items": []})
    assert missing is not None and missing.path == "data" and "'amount' is a required property" in missing.message
    wrong = catalog.violation("order.paid", {"amount": "3", "items": []})
    assert wrong is not None and wrong.path == "data.amount" and "'3' is not of type 'number'" in wrong.message
    nested = catalog.violation("order.paid", {"amount": 1, "items": [{"sku": "a"}, {}]})
    assert nested is not None and nested.path == "data.items[1]" and nested.version == 1


def test_the_newest_version_is_checked_and_a_type_without_schema_or_entry_is_not() -> None:
    v2 = {"type": "object", "required": ["total"]}
    catalog = Catalog((spec(version=2, schema=v2), spec(version=1)))
    assert catalog.newest("order.paid") is not None and catalog.newest("order.paid").version == 2  # type: ignore[union-attr]
    assert catalog.violation("order.paid", {"total": 1}) is None  # v1 would want amount
    broken = catalog.violation("order.paid", {"amount": 1, "items": []})
    assert broken is not None and broken.version == 2
    described = Catalog((spec(name="user.created", schema=None, description="A user signed up"),))
    assert described.violation("user.created", 42) is None and described.violation("unknown.type", 42) is None


def test_the_file_wins_over_the_store_for_the_same_version() -> None:
    config = WarrenConfig.model_validate({"event_types": [{"name": "order.paid", "json_schema": ORDER}]})
    stored = (spec(schema={"type": "string"}), spec(name="order.refunded", schema=None))
    catalog = config.event_catalog(stored)
    assert [(s.name, s.version) for s in catalog.specs] == [("order.paid", 1), ("order.refunded", 1)]
    assert catalog.violation("order.paid", {"amount": 1, "items": []}) is None  # the file's schema, not "string"


def test_the_file_refuses_a_schema_that_is_not_one_and_a_version_twice() -> None:
    with pytest.raises(ValidationError, match="not a JSON Schema"):
        WarrenConfig.model_validate({"event_types": [{"name": "order.paid", "json_schema": {"type": "nonsense"}}]})
    with pytest.raises(ValidationError, match="version 1 appears twice"):
        WarrenConfig.model_validate({"event_types": [{"name": "a.b"}, {"name": "a.b", "version": 1}]})
    with pytest.raises(ValidationError):
        WarrenConfig.model_validate({"event_types": [{"name": "order.*"}]})  # a pattern is not a type


def test_the_exports_carry_every_version_and_the_envelope() -> None:
    specs = Catalog((spec(), spec(version=2, deprecated=True), spec(name="user.created", schema=None))).specs
    bundle = json_schema_bundle(specs)
    assert set(bundle["$defs"]) == {"order.paid.v1", "order.paid.v2", "user.created.v1"}
    assert bundle["$defs"]["order.paid.v2"]["deprecated"] is True
    document = asyncapi_document(specs)
    assert document["asyncapi"] == "3.0.0" and set(document["channels"]) == {"order_paid", "user_created"}
    message = document["components"]["messages"]["order_paid"]
    assert message["deprecated"] is True  # the newest version is
    assert message["payload"]["required"] == ["id", "type", "timestamp", "data"]
    assert message["payload"]["properties"]["data"] == ORDER
