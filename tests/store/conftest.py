from tests.support.store import store_postgres, store_url

__all__ = ["store_postgres", "store_url"]
