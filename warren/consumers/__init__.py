"""The delivery worker (``warren worker``) and endpoint health (``health``: the circuit breaker and the limits).

``Worker(config, endpoints).run()`` delivers until SIGTERM or SIGINT. A ``Transport`` (``send`` returning a
``SendResult``, from ``warren.transport``) is the seam for a sink other than HTTP. The receiving toolkit, once
``warren.consumers.receiving``, is ``warren.receiving`` (the earlier path still imports).
"""

from __future__ import annotations

import typing as _typing

from warren.transport.base import SendResult, Transport

if _typing.TYPE_CHECKING:
    from warren.consumers.worker import Worker

__all__ = ["SendResult", "Transport", "Worker"]


def __getattr__(name: str) -> _typing.Any:
    # The worker (and through it aiohttp) loads on first use, so that importing one transport-neutral module
    # of this package (the decision, the settling, the health gates) does not pull HTTP in.
    if name == "Worker":
        from warren.consumers.worker import Worker

        return Worker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
