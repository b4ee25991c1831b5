"""Warren's consumers: the delivery worker (``warren worker``) and, in ``warren.consumers.receiving``, the toolkit
for receiving webhooks.

``Worker(config, endpoints).run()`` delivers until SIGTERM or SIGINT. A ``Transport`` (``send`` returning a
``SendResult``) is the seam for a sink other than HTTP. The other parts (the endpoint runner, signing,
classification, the health and limits gates, the metrics) live in their own modules.
"""

from __future__ import annotations

from warren.consumers.transport import SendResult, Transport
from warren.consumers.worker import Worker

__all__ = ["SendResult", "Transport", "Worker"]
