"""What apply_endpoint refuses before it touches RabbitMQ: a private address, and a retry wait the delay chain
set up for the deployment cannot reach. Pure: the checks run first, so no broker is needed."""

from __future__ import annotations

import pytest

from warren.broker.live_apply import apply_endpoint
from warren.core.errors import LiveApplyError
from warren.topology.config import Endpoint, WarrenConfig

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
# Nothing listens here: reaching the broker would fail differently (BrokerUnavailable, ManagementError).
SETTINGS = WarrenConfig(broker={"url": "amqp://guest:guest@127.0.0.1:9/%2F", "management_url": "http://127.0.0.1:9"})


def endpoint(**fields: object) -> Endpoint:
    return Endpoint.model_validate(
        {"name": "e", "url": "https://hooks.example/in", "secret": SECRET, "events": ["#"], **fields}
    )


async def test_a_private_address_is_refused_as_the_configuration_refuses_it() -> None:
    with pytest.raises(LiveApplyError, match="url refused"):
        await apply_endpoint(SETTINGS, endpoint(url="http://10.0.0.7/hook"))


async def test_a_retry_wait_beyond_the_delay_chain_is_refused() -> None:
    # Given the deployment's chain reaches the default cap (1 h): an endpoint asking for 6 h cannot be served
    with pytest.raises(LiveApplyError, match="delay chain"):
        await apply_endpoint(SETTINGS, endpoint(retry={"cap": "6h"}))
