"""Binary delay levels: the routing key spells the delay, quantised to what the levels can hold."""

from __future__ import annotations

import pytest

from warren.topology.delays import delay_routing_key, level_count, levels_for_delay, quantise_ms


@pytest.mark.parametrize(
    ("seconds", "levels"),
    [
        (0.0, 1),
        (0.001, 1),
        (0.002, 2),
        (0.003, 2),
        (0.004, 3),
        (1.0, 10),
        (1.023, 10),  # 2^10 - 1 ms: the ten levels' sum
        (1.024, 11),  # 2^10 ms: one more level
        (2.0, 11),
        (3600.0, 22),
        (7200.0, 23),
    ],
)
def test_level_count_reaches_the_longest_delay(seconds: float, levels: int) -> None:
    assert level_count(seconds) == levels
    # the levels together hold the longest delay: 2^L - 1 ms >= delay
    assert (1 << levels) - 1 >= round(seconds * 1000)


@pytest.mark.parametrize(
    ("seconds", "levels", "ms"),
    [
        (0.0, 4, 0),
        (0.005, 4, 5),
        (0.0054, 4, 5),  # rounded to the millisecond
        (0.0056, 4, 6),
        (0.015, 4, 15),
        (0.016, 4, 15),  # clamped to 2^4 - 1
        (99.0, 4, 15),
        (-1.0, 4, 0),  # never negative
        (1.5, 11, 1500),
    ],
)
def test_quantise_rounds_to_ms_and_clamps_to_the_levels(seconds: float, levels: int, ms: int) -> None:
    assert quantise_ms(seconds, levels) == ms


@pytest.mark.parametrize(
    ("seconds", "levels", "key"),
    [
        (0.005, 4, "1.0.1.0.warren.ep.acme.q"),  # the docstring's example: 5 = 0b0101, lowest bit first
        (0.0, 3, "0.0.0.warren.ep.acme.q"),
        (0.001, 3, "1.0.0.warren.ep.acme.q"),
        (0.007, 3, "1.1.1.warren.ep.acme.q"),
        (0.008, 4, "0.0.0.1.warren.ep.acme.q"),
    ],
)
def test_routing_key_spells_the_delay_in_binary_then_the_queue(seconds: float, levels: int, key: str) -> None:
    assert delay_routing_key(seconds, levels, "warren.ep.acme.q") == key


@pytest.mark.parametrize("ms", [0, 1, 2, 5, 255, 1000, 1023, 3_600_000])
def test_the_levels_a_message_waits_in_add_up_to_its_delay(ms: int) -> None:
    # Given a delay in ms and enough levels
    levels = level_count(ms / 1000)
    # When it is split into levels
    waits = levels_for_delay(ms, levels)
    # Then each level waits 2^k ms, in order, and together they make the delay exactly
    assert sum(1 << k for k in waits) == ms
    assert list(waits) == sorted(waits)
    # and the routing key's words say the same thing, level by level
    bits = delay_routing_key(ms / 1000, levels, "q").split(".")[:levels]
    assert [k for k, bit in enumerate(bits) if bit == "1"] == list(waits)
