from collections.abc import AsyncIterator

import pytest

from tests.support.store import store_postgres, store_url
from warren.store.attempts import AttemptLog
from warren.topology.config import StoreSettings

__all__ = ["store_postgres", "store_url"]


@pytest.fixture
async def attempts(store_url: str) -> AsyncIterator[AttemptLog]:
    """The attempt log on each backend in turn, empty."""
    opened = await AttemptLog.open(StoreSettings(url=store_url))
    yield opened
    await opened.close()
