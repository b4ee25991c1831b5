"""The plan: immutable descriptions of the exchanges, queues and bindings Warren needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

__all__ = ["Binding", "Exchange", "Plan", "Queue"]

ArgValue = str | int | bool
Arguments = Mapping[str, ArgValue]


def _frozen(arguments: Mapping[str, ArgValue] | None) -> Arguments:
    return MappingProxyType(dict(sorted((arguments or {}).items())))


@dataclass(frozen=True)
class Exchange:
    name: str
    type: Literal["topic", "direct", "fanout", "headers", "x-consistent-hash"]
    arguments: Arguments = field(default_factory=dict)
    durable: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", _frozen(self.arguments))


@dataclass(frozen=True)
class Queue:
    name: str
    arguments: Arguments = field(default_factory=dict)
    durable: bool = True
    role: str = ""  # what the queue is for, shown by `topology show` ("work", "partition 3", "delay 2^5 ms", ...)
    endpoint: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", _frozen(self.arguments))


@dataclass(frozen=True)
class Binding:
    source: str
    destination: str
    destination_type: Literal["queue", "exchange"]
    routing_key: str = ""
    arguments: Arguments = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", _frozen(self.arguments))


@dataclass(frozen=True)
class Plan:
    """Everything to declare, in an order that is safe to apply (exchanges, then queues, then bindings)."""

    exchanges: tuple[Exchange, ...]
    queues: tuple[Queue, ...]
    bindings: tuple[Binding, ...]
    delay_levels: int

    def exchange(self, name: str) -> Exchange:
        return next(e for e in self.exchanges if e.name == name)

    def queue(self, name: str) -> Queue:
        return next(q for q in self.queues if q.name == name)

    def endpoint_queues(self, endpoint: str) -> tuple[Queue, ...]:
        return tuple(q for q in self.queues if q.endpoint == endpoint)
