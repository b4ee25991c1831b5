"""``[broker] url`` and ``management_url`` as one node or a list of a cluster's nodes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from warren.topology.config import BrokerSettings, WarrenConfig

NODES = ["amqp://u:p@rabbit-1:5672/prod", "amqp://u:p@rabbit-2:5672/prod", "amqps://u:p@rabbit-3:5671/prod"]


def test_one_url_is_a_list_of_one() -> None:
    broker = BrokerSettings(url="amqp://u:p@rabbit:5672/%2F", management_url="http://rabbit:15672")
    assert broker.urls == ("amqp://u:p@rabbit:5672/%2F",)
    assert broker.management_bases() == ("http://rabbit:15672",)
    assert broker.vhost == "/"


def test_a_list_of_nodes_keeps_its_order_and_vhost() -> None:
    broker = BrokerSettings(url=NODES, management_url=["http://a:p@rabbit-1:15672", "http://rabbit-2:15672/"])
    assert broker.urls == tuple(NODES)
    assert broker.vhost == "prod"
    assert broker.management_bases() == ("http://rabbit-1:15672", "http://rabbit-2:15672")
    assert broker.management_credentials() == ("a", "p")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ([], "lists no node"),
        (["amqp://rabbit-1/a", "amqp://rabbit-2/b"], "must name the same vhost"),
        (["amqp://rabbit-1/", "http://rabbit-2/"], "amqp:// or amqps://"),
    ],
)
def test_a_bad_node_list_is_refused_with_a_reason(url: list[str], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        BrokerSettings(url=url)


def test_the_environment_gives_the_list_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARREN_BROKER__URL", '["amqp://rabbit-1:5672/", "amqp://rabbit-2:5672/"]')
    monkeypatch.setenv("WARREN_BROKER__MANAGEMENT_URL", "http://rabbit-1:15672")
    config = WarrenConfig()
    assert config.broker.urls == ("amqp://rabbit-1:5672/", "amqp://rabbit-2:5672/")
    assert config.broker.management_urls == ("http://rabbit-1:15672",)
    # and a dumped configuration loads again as it was
    assert WarrenConfig.model_validate(config.model_dump(mode="json")).broker.urls == config.broker.urls
