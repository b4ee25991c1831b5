"""ConfirmChannel: a nack opens a new channel and publishes again there; nacks that persist reach the caller.

The stale-leader nack itself needs a cluster (tests/cluster/test_stale_nack.py); here a full queue that
rejects publishes (``x-overflow: reject-publish``) nacks on one node.
"""

from __future__ import annotations

import aio_pika
import pytest

from warren.broker.amqp import confirm_channel
from warren.broker.amqp.confirm import Nacked
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.core.errors import PublishError, UnroutableError


@pytest.mark.timeout(20)
async def test_a_nack_renews_the_channel_and_a_lasting_one_is_the_callers_error(
    amqp_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confirm_channel, "RENEW_PAUSE", 0.01)
    connection = await aio_pika.connect(amqp_url)
    try:
        queue_name = f"{prefix}.full"
        declared = await (await connection.channel()).declare_queue(
            queue_name, durable=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
        )
        channel = await ConfirmChannel(connection).open()
        first = channel.channel
        # Given a queue with room for one message, When two are published
        await channel.publish("", aio_pika.Message(b"1"), queue_name, what="the first")
        with pytest.raises(Nacked) as caught:
            await channel.publish("", aio_pika.Message(b"2"), queue_name, what="the second")
        # Then the second is refused after every new channel was nacked too, and the old channels are closed
        assert isinstance(caught.value, PublishError) and "nack" in str(caught.value)
        assert channel.renewals == confirm_channel.RENEWALS
        assert first.is_closed and not channel.channel.is_closed
        # and once there is room, the current channel publishes; an unroutable message is still unroutable
        await declared.purge()
        await channel.publish("", aio_pika.Message(b"3"), queue_name, what="the third")
        with pytest.raises(UnroutableError):
            await channel.publish("", aio_pika.Message(b"4"), f"{prefix}.nowhere", what="the fourth")
        assert channel.renewals == confirm_channel.RENEWALS
        await channel.close()
        assert channel.channel.is_closed
    finally:
        await connection.close()
