"""The worker's map of runners, in which a lane endpoint read at start gets its runner on its first message.

A long tail of lane endpoints mostly receives nothing for hours, and a worker that starts reads every one of
them from the endpoints stream (warren/consumers/live_endpoints.py). Building each one's runner and endpoint
health guard then cost about 5 KiB and a few hundred microseconds an endpoint: 100,000 endpoints took over
800 MiB and most of a minute before the worker consumed anything. So an endpoint read at start is filed in the
router's index at once (its events are routed to its lane) and only *deferred* here; the lane consumer's first
``get`` for it builds its runner, as ``Worker.serve_endpoint`` would have, on the lanes' shared channel.

Endpoints with a fleet-wide limit (``rate_limit``, ``max_in_flight``) are never deferred: joining the limit's
roster needs the broker. Endpoints announced while the worker runs are served at once, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from warren.consumers.endpoint_runner import EndpointRunner
from warren.topology.config import Endpoint

__all__ = ["Runners", "deferrable"]

log = logging.getLogger("warren.worker")


def deferrable(endpoint: Endpoint) -> bool:
    """A lane endpoint whose runner needs nothing of the broker to be built (no fleet-wide limit)."""
    return endpoint.home == "lane" and endpoint.rate_limit is None and endpoint.max_in_flight is None


class Runners(dict[str, EndpointRunner]):
    """Endpoint -> its runner; ``get`` builds a deferred endpoint's (``build``, set once the worker can)."""

    def __init__(self) -> None:
        super().__init__()
        self.deferred: dict[str, Endpoint] = {}
        self.build: Callable[[Endpoint], EndpointRunner] | None = None

    def defer(self, endpoint: Endpoint) -> None:
        self.deferred[endpoint.name] = endpoint

    def forget(self, name: str) -> bool:
        """Drop a deferred endpoint (no longer served); True when it was one."""
        return self.deferred.pop(name, None) is not None

    def get(self, name: str, default: Any = None, /) -> Any:
        runner = dict.get(self, name)  # not super(): asked for every event the router delivers inline
        if runner is not None:
            return runner
        if self.build is not None and name in self.deferred:
            endpoint = self.deferred.pop(name)
            try:
                runner = self.build(endpoint)
            except Exception:  # its message is parked as an unserved endpoint's, and the next one tries again
                log.exception("lane endpoint %s: runner not built", name, extra={"endpoint": name})
                self.deferred[name] = endpoint
                return default
            self[name] = runner
        return runner if runner is not None else default
