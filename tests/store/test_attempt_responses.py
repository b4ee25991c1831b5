"""The answers the attempt log keeps (the start of the body, content-type and retry-after), on SQLite and
PostgreSQL: what a record written before them reads as, what an older writer does with them, and a log kept by
the release before them upgraded in place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
from sqlalchemy import text

from tests.support.attempts import T0, attempt
from tests.support.store import PostgresDatabase
from warren.store.attempt_records import RESPONSE_CHARS, decode_batch, encode_batch
from warren.store.attempts import AttemptLog
from warren.store.engine import current_revision, head_revision, migrate, open_engine

pytestmark = pytest.mark.timeout(60)


def test_a_record_without_an_answer_reads_as_none_and_an_unknown_field_is_left() -> None:
    # Given a batch as a worker of the release before wrote it (no response fields), and one from a later
    # release with a field this writer does not know
    old = orjson.loads(encode_batch([attempt()]))
    for record in old["attempts"]:
        del record["response"], record["response_headers"]
    later = orjson.loads(encode_batch([attempt(response="ok")]))
    later["attempts"][0]["signed_with"] = "v1a"
    # When they are read, then the old one has no answer and the later one keeps what this release knows
    (before,) = decode_batch(orjson.dumps(old))
    (after,) = decode_batch(orjson.dumps(later))
    assert (before.response, before.response_headers) == (None, None)
    assert after.response == "ok" and not hasattr(after, "signed_with")


def test_an_answer_longer_than_the_log_keeps_is_cut_with_a_mark() -> None:
    # Given a record whose answer is longer than RESPONSE_CHARS (a worker with a huge response_body_limit)
    body = orjson.loads(encode_batch([attempt(response="x" * (RESPONSE_CHARS + 10))]))
    # When the writer reads it, then it keeps RESPONSE_CHARS characters, the last one saying it was cut
    (entry,) = decode_batch(orjson.dumps(body))
    assert entry.response is not None and len(entry.response) == RESPONSE_CHARS and entry.response[-1] == "…"
    exact = "y" * RESPONSE_CHARS
    (kept,) = decode_batch(encode_batch([attempt(response=exact)]))
    assert kept.response == exact


async def test_an_answer_and_its_headers_are_stored_as_given_nul_characters_made_storable(
    attempts: AttemptLog,
) -> None:
    # Given attempts whose answers hold a NUL (PostgreSQL text cannot), invalid UTF-8 already replaced by the
    # worker, and headers; and one attempt that got no answer
    answered = attempt(
        response='{"error": "amount\x00"} \ufffd',
        response_headers={"content-type": "application/json\x00", "retry-after": "5"},
    )
    silent = attempt(attempt=2, at=T0 + 1, status=None, error="timed out after 5s")
    # When they are stored and read back
    assert await attempts.add_many([answered, silent]) == 2
    first, second = await attempts.for_event("evt_1")
    # Then the answer is there, each NUL as U+FFFD, and the silent attempt has none
    assert first.response == '{"error": "amount\ufffd"} \ufffd'
    assert first.response_headers == {"content-type": "application/json\ufffd", "retry-after": "5"}
    assert (second.response, second.response_headers) == (None, None)


@pytest.fixture(params=["sqlite", "postgresql"])
async def unmigrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """An empty database of this test's own, never migrated."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.sqlite3'}"
        return
    database = PostgresDatabase()
    try:
        yield await database.get()
    finally:
        await database.drop()


async def test_a_log_kept_by_the_release_before_upgrades_in_place(unmigrated_url: str) -> None:
    # Given a store at revision 0002 (the release before kept no answers) holding an attempt
    engine = open_engine(unmigrated_url)
    try:
        assert await migrate(engine, revision="0002") == (None, "0002")
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO warren_attempts (id, event_id, tenant, endpoint, attempt, at, status, duration_ms,"
                    " outcome, error, next_delay_s, worker) VALUES ('att_old', 'evt_old', 'acme', 'billing', 1,"
                    f" {T0}, 503, 12.5, 'retry', 'HTTP 503', 0.8, 'host:42')"
                )
            )
        # When Warren starts on it (the store migrates to the latest revision)
        assert await migrate(engine) == ("0002", head_revision())
        assert await current_revision(engine) == head_revision()
        log = AttemptLog(engine)
        # Then the earlier attempt reads as it was, without an answer, and new ones keep theirs
        (old,) = await log.for_event("evt_old")
        assert (old.id, old.status, old.error, old.response, old.response_headers) == (
            "att_old",
            503,
            "HTTP 503",
            None,
            None,
        )
        new = attempt(event_id="evt_old", attempt=2, at=T0 + 1, response="busy", response_headers={"retry-after": "1"})
        assert await log.add_many([new]) == 1
        assert (await log.for_event("evt_old"))[1] == new
    finally:
        await engine.dispose()
