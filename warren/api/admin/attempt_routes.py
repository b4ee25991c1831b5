"""The admin API's routes over what was delivered: an event's attempts, an endpoint's attempts, and recovering
an endpoint's dead letters since a moment.

A tenant's key sees its own tenant's attempts only: an event's list leaves out the attempts at other tenants'
endpoints, and an endpoint's list those of another tenant (the log outlives a deleted endpoint, so the filter
is on the attempt's tenant, not on the endpoint as it is now).
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import UTC, datetime

from aiohttp import web

from warren.api.admin.dead_letters import recover_since, replay_chosen
from warren.api.admin.requests import INVALID_REQUEST, access, as_json, path_part, read_body, read_query
from warren.api.admin.schemas import (
    EVENT_ID_PATTERN,
    NAME_PATTERN,
    AttemptOut,
    AttemptPage,
    AttemptQuery,
    EventAttempts,
    RecoverOut,
    ReplayIn,
    ReplayOut,
)
from warren.api.ingest.errors import ApiError, FieldProblem
from warren.broker.dlq.selection import parse_moment
from warren.core.moments import iso_utc
from warren.store.attempt_records import AttemptEntry
from warren.store.attempts import AttemptLog

__all__ = ["endpoint_attempts", "event_attempts", "recover", "replay"]

_EVENT_ID = re.compile(EVENT_ID_PATTERN)
_NAME = re.compile(NAME_PATTERN)


def _attempt(entry: AttemptEntry) -> AttemptOut:
    return AttemptOut(**{**asdict(entry), "at": iso_utc(entry.at) or "", "failed": entry.failed})


async def event_attempts(request: web.Request) -> web.Response:
    service, caller = await access(request)
    event_id = path_part(request, "event_id", _EVENT_ID, "an event id (1-200 letters, digits, '_-.:')")
    entries = await AttemptLog(service.store.engine).for_event(event_id)
    if caller.tenant is not None:
        entries = [e for e in entries if e.tenant == caller.tenant]
    return as_json(EventAttempts(event_id=event_id, data=[_attempt(e) for e in entries]))


async def endpoint_attempts(request: web.Request) -> web.Response:
    service, caller = await access(request)
    query = read_query(request, AttemptQuery)
    name = path_part(request, "name", _NAME, "an endpoint name")
    try:
        page = await AttemptLog(service.store.engine).for_endpoint(
            name,
            failed_only=query.status == "failed",
            since=query.since,
            until=query.until,
            limit=query.limit,
            cursor=query.cursor,
            tenant=caller.tenant,
        )
    except ValueError as exc:
        raise ApiError(422, INVALID_REQUEST, str(exc), [FieldProblem("cursor", str(exc))]) from None
    return as_json(AttemptPage(data=[_attempt(e) for e in page.entries], next_cursor=page.next_cursor))


async def recover(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    service, _ = await access(request, name)
    since = request.query.get("since")
    if not since:
        raise ApiError(422, INVALID_REQUEST, "since is required: an ISO 8601 time or a duration ago (1h)")
    try:
        since_ms = parse_moment(since, datetime.now(UTC))
    except (ValueError, OverflowError) as exc:
        raise ApiError(422, INVALID_REQUEST, f"since: {exc}") from None
    report = await recover_since(service, name, since_ms)
    return as_json(
        RecoverOut(
            name=name,
            since=iso_utc(since_ms / 1000) or "",
            recovered=report.moved,
            dlq_depth=report.depth,
            scanned=report.scanned,
        )
    )


async def replay(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    service, _ = await access(request, name)
    body = await read_body(request, ReplayIn)
    report = await replay_chosen(service, name, frozenset(body.event_ids))
    return as_json(ReplayOut(name=name, replayed=report.moved, dlq_depth=report.depth, scanned=report.scanned))
