"""``quick_init`` (warren/core/frozen.py): the same dataclass, frozen as before, made without a setattr a field."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from warren.consumers.hooks import AttemptRecord
from warren.core.frozen import quick_init
from warren.transport.base import Delivery, Outcome, SendResult


@dataclasses.dataclass(frozen=True)
class Plain:
    a: int
    b: str = "x"
    c: tuple[int, ...] = ()
    d: dict[str, int] | None = dataclasses.field(default=None, compare=False, repr=False)


@quick_init
@dataclasses.dataclass(frozen=True)
class Quick:
    a: int
    b: str = "x"
    c: tuple[int, ...] = ()
    d: dict[str, int] | None = dataclasses.field(default=None, compare=False, repr=False)


def test_the_same_instances_as_the_dataclass_own_init() -> None:
    for args, kwargs in [((1,), {}), ((1, "y"), {"c": (2,)}), ((), {"a": 3, "d": {"k": 1}})]:
        plain, quick = Plain(*args, **kwargs), Quick(*args, **kwargs)
        assert vars(plain) == vars(quick)
        assert repr(plain).replace("Plain", "Quick") == repr(quick)
        assert hash(quick) == hash(Quick(*args, **kwargs)) and quick == Quick(*args, **kwargs)
    assert str(inspect.signature(Plain)) == str(inspect.signature(Quick))
    assert dataclasses.replace(Quick(1), b="z") == Quick(1, "z")


def test_still_frozen_and_the_same_errors() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Quick(1).a = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Quick()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Quick(1, e=2)  # type: ignore[call-arg]


def test_a_class_it_cannot_do_keeps_its_init() -> None:
    @dataclasses.dataclass(frozen=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            object.__setattr__(self, "a", self.a * 2)

    for cls in (Factory, Post):
        init = cls.__init__
        assert quick_init(cls).__init__ is init
    assert Post(2).a == 4


def test_the_hot_path_classes_use_it() -> None:
    for cls in (Delivery, SendResult, AttemptRecord):
        assert cls.__init__.__module__ == cls.__module__
        assert "_set" in cls.__init__.__globals__
    result = SendResult(Outcome.DELIVERED, "HTTP 200", status=200)
    assert (result.excerpt, result.response_headers, result.refused) == ("", (), False)
