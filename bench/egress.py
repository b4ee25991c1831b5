"""Per-endpoint headers and the egress proxy at the transport: POSTs per second to a local receiver, side by side.

Not part of the test suite. One process, one event loop: the receiver (aiohttp), the forward proxy of the tests
(tests/support/http_proxy.py: asyncio, one connection per forwarded request) and the transport under test, so the
figures are ratios taken in the same run, variant after variant, round after round (medians printed).

    PYTHONPATH=. .venv/bin/python bench/egress.py --rounds 5 --posts 2000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from tests.conftest import TEST_SECRET
from tests.support.http_proxy import HttpProxy
from tests.support.receiver import Receiver
from warren.topology.config import DeliverySettings, Endpoint
from warren.transport.base import Delivery
from warren.transport.http import HttpTransport

HEADERS = {
    "X-Team": "billing",
    "X-Region": "eu-west-1",
    "X-Trace-Tag": "bench",
    "Authorization": {"value": "Bearer 0123456789abcdef0123456789abcdef", "secret": True},
}


async def rate(transport: HttpTransport, endpoint: Endpoint, posts: int, concurrency: int) -> float:
    delivery = Delivery("evt_1", "a.b", b'{"n": 1}' * 16, 0, 0, None, ())
    left = posts

    async def one_lane() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            result = await transport.send(endpoint, delivery)
            assert result.status == 200, result

    started = time.perf_counter()
    await asyncio.gather(*(one_lane() for _ in range(concurrency)))
    return posts / (time.perf_counter() - started)


async def main(rounds: int, posts: int, concurrency: int) -> None:
    async with Receiver() as receiver, HttpProxy() as proxy:
        base = {"name": "b", "url": receiver.url, "secret": TEST_SECRET, "events": ["#"]}
        variants = {
            "direct": (DeliverySettings(allow_private_networks=True), Endpoint.model_validate(base)),
            "direct + 4 headers": (
                DeliverySettings(allow_private_networks=True),
                Endpoint.model_validate({**base, "headers": HEADERS}),
            ),
            "via proxy (forwarded)": (
                DeliverySettings(allow_private_networks=True, proxy=proxy.url),
                Endpoint.model_validate(base),
            ),
        }
        figures: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, (settings, endpoint) in variants.items():
                session, transport = HttpTransport.for_settings(settings)
                try:
                    await rate(transport, endpoint, posts // 10, concurrency)  # warm the connections
                    figures[name].append(await rate(transport, endpoint, posts, concurrency))
                finally:
                    await session.close()
        baseline = statistics.median(figures["direct"])
        for name, values in figures.items():
            median = statistics.median(values)
            runs = ", ".join(f"{v:.0f}" for v in values)
            print(f"{name:24} median {median:7.0f} POST/s  ({median / baseline:.2f} of direct)  runs: {runs}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.posts, args.concurrency))
