"""The limits' arithmetic: token bucket, fleet shares, ramp. Pure, on a fake clock."""

from __future__ import annotations

import pytest

from warren.consumers.health.limits import Ramp, TokenBucket, in_flight_share, rate_share


def test_the_bucket_allows_the_burst_then_the_rate() -> None:
    bucket = TokenBucket(rate=10.0, capacity=3.0, now=0.0)
    # Given a full bucket of 3: three requests at once, then the fourth waits a tenth of a second
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.1)
    # When a second (and a bit) has passed, then 10 requests were allowed over it, not the 100 asked for
    taken = sum(1 for t in range(105) if bucket.take(0.01 * (t + 1)) == 0.0)
    assert taken == 10


def test_over_a_long_run_the_bucket_holds_the_rate() -> None:
    bucket = TokenBucket(rate=20.0, capacity=2.0, now=0.0)
    granted = sum(1 for i in range(10_000) if bucket.take(i * 0.001) == 0.0)  # 10 s of eager callers
    assert 200 <= granted <= 202  # 20/s for 10 s, plus the initial burst


def test_reconfiguring_keeps_no_more_tokens_than_the_new_capacity() -> None:
    bucket = TokenBucket(rate=10.0, capacity=10.0, now=0.0)
    bucket.configure(rate=5.0, capacity=2.0, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)][:2] == [0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("rate", "burst", "workers", "expected"),
    [(20.0, None, 1, (20.0, 20.0)), (20.0, None, 2, (10.0, 10.0)), (20.0, 4, 4, (5.0, 1.0)), (1.0, 1, 3, (1 / 3, 1.0))],
)
def test_rate_share(rate: float, burst: int | None, workers: int, expected: tuple[float, float]) -> None:
    assert rate_share(rate, burst, workers) == pytest.approx(expected)


@pytest.mark.parametrize(("limit", "workers", "share"), [(8, 1, 8), (8, 2, 4), (8, 3, 2), (2, 3, 1), (5, 0, 5)])
def test_in_flight_share_never_lets_the_fleet_exceed_the_limit_unless_workers_outnumber_it(
    limit: int, workers: int, share: int
) -> None:
    assert in_flight_share(limit, workers) == share


def test_the_ramp_doubles_up_to_the_ceiling() -> None:
    ramp = Ramp(1)
    limits = []
    for _ in range(6):
        limits.append(ramp.limit(16))
        ramp.success()
    assert limits == [1, 2, 4, 8, 16, 16]
    assert ramp.done(16)
