"""What signing one request costs: the Standard Webhooks headers of one attempt with an HMAC secret, an Ed25519
key, and both (a migration), side by side, and what reading a ``whsk_`` key costs (once per endpoint apply).

    .venv/bin/python bench/signing_cost.py [--runs 7] [--number 20000] [--body 1000]

Prints the median of the runs in microseconds per request and the ratio to HMAC. CPU only: no network.
"""

from __future__ import annotations

import argparse
import statistics
import timeit

from warren.topology.config import Endpoint
from warren.topology.signing_keys import Ed25519Secret, new_ed25519_secret
from warren.transport.base import Delivery
from warren.transport.http import webhook_headers

HMAC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--body", type=int, default=1000, help="bytes of the event's data")
    args = parser.parse_args()
    key = new_ed25519_secret()
    body = b'{"type":"order.paid","data":{"x":"' + b"a" * args.body + b'"}}'
    delivery = Delivery("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "order.paid", body, 0, 0, None, ())
    base = {"name": "e", "url": "https://example.com/h", "events": ["#"]}
    endpoints = {
        "hmac": Endpoint.model_validate(base | {"secret": HMAC_SECRET}),
        "ed25519": Endpoint.model_validate(base | {"secret": key}),
        "both": Endpoint.model_validate(base | {"secret": [HMAC_SECRET, key]}),
    }
    runs: dict[str, list[float]] = {name: [] for name in endpoints}
    for _ in range(args.runs):  # interleaved, so that the machine's noise falls on each alike
        for name, endpoint in endpoints.items():
            seconds = timeit.timeit(lambda e=endpoint: webhook_headers(e, delivery, 1700000000), number=args.number)
            runs[name].append(seconds / args.number * 1e6)
    hmac_median = statistics.median(runs["hmac"])
    for name, values in runs.items():
        median = statistics.median(values)
        print(f"{name:8s} {median:7.2f} us/request  x{median / hmac_median:4.1f}  runs {[round(v, 1) for v in values]}")
    parse = timeit.timeit(lambda: Ed25519Secret(key), number=2000) / 2000 * 1e6
    print(f"reading a whsk_ key (once per endpoint apply): {parse:.1f} us")


if __name__ == "__main__":
    main()
