"""What an ordered endpoint's runner remembers of a message it gave back: the returns that only waited for its
next attempt are counted, so that ``delivery.max_handbacks`` leaves them out, and forgotten with the message."""

from __future__ import annotations

import pytest

from warren.consumers.held_attempts import HeldAttempts

pytestmark = pytest.mark.timeout(5)


def test_waits_are_counted_for_a_remembered_message_and_forgotten_with_it() -> None:
    # Given a message remembered with its next attempt due, and one the runner knows nothing of
    held = HeldAttempts()
    held.remember("e1", (1, 1000, []), due=5.0)
    # When each is handed back twice to wait
    for _ in range(2):
        held.waited("e1")
        held.waited("unknown")
    # Then only the remembered message's waits are counted, until it is forgotten
    assert (held.waits("e1"), held.waits("unknown")) == (2, 0)
    held.forget("e1")
    assert held.waits("e1") == 0


def test_waits_go_with_the_memory_the_bound_evicts() -> None:
    # Given a memory of one message that waited
    held = HeldAttempts(limit=1)
    held.remember("e1", (1, 1000, []), due=5.0)
    held.waited("e1")
    # When another message is remembered past the limit
    held.remember("e2", (1, 1000, []), due=5.0)
    # Then the first one's waits went with it
    assert (held.waits("e1"), held.due("e1")) == (0, None)
