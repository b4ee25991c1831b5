"""The circuit's transitions, as the records every worker shares: pure functions of the current view.

::

    closed ──trip──▶ open ──probe_started──▶ half-open ──closed──▶ closed
                      ▲                          │
                      └──────probe_failed────────┘   (a longer cool-down each time, bounded)

The worker's breaker (``warren.consumers.health.breaker``) decides when; an operator's ``enable`` restarts an
open circuit's clock (``restarted``). Here only what each transition writes.
"""

from __future__ import annotations

from warren.broker.endpoint_state.records import CIRCUIT, CLOSED, HALF_OPEN, OPEN, EndpointView, StateRecord
from warren.topology.config import CircuitSettings

__all__ = ["closed", "cooldown_for", "probe_failed", "probe_started", "restarted", "trip"]


def cooldown_for(failed_probes: int, settings: CircuitSettings) -> float:
    """Seconds to wait before the next probe: ``cooldown * factor^failed_probes``, at most ``cooldown_max``."""
    return min(settings.cooldown_max, settings.cooldown * settings.cooldown_factor**failed_probes)


def trip(view: EndpointView, reason: str, now: float, by: str, settings: CircuitSettings) -> StateRecord:
    """closed -> open: a new outage begins."""
    return view.record(
        CIRCUIT, OPEN, reason, now, by, opened_at=now, failures=0, retry_at=now + cooldown_for(0, settings)
    )


def probe_started(view: EndpointView, now: float, by: str) -> StateRecord:
    """open -> half-open: ``by`` holds the probe lock and lets one delivery through."""
    current = view.circuit
    opened_at = current.opened_at if current and current.opened_at else now
    return view.record(
        CIRCUIT,
        HALF_OPEN,
        current.reason if current else "probing",
        now,
        by,
        since=opened_at,
        opened_at=opened_at,
        failures=current.failures if current else 0,
    )


def probe_failed(view: EndpointView, reason: str, now: float, by: str, settings: CircuitSettings) -> StateRecord:
    """half-open -> open: the outage goes on, and the next probe waits longer."""
    current = view.circuit
    opened_at = current.opened_at if current and current.opened_at else now
    failures = (current.failures if current else 0) + 1
    return view.record(
        CIRCUIT,
        OPEN,
        f"probe failed: {reason}",
        now,
        by,
        since=opened_at,
        opened_at=opened_at,
        failures=failures,
        retry_at=now + cooldown_for(failures, settings),
    )


def restarted(view: EndpointView, reason: str, now: float, by: str) -> StateRecord:
    """An open circuit's outage clock restarted (an operator enabled the endpoint): probe at once.

    Without it, an endpoint auto-disabled for being open too long would be disabled again by the first
    worker to look, since its outage began more than ``disable_after`` ago.
    """
    return view.record(CIRCUIT, OPEN, reason, now, by, opened_at=now, failures=0, retry_at=now)


def closed(view: EndpointView, reason: str, now: float, by: str) -> StateRecord:
    """-> closed: the probe succeeded, or an operator enabled the endpoint."""
    return view.record(CIRCUIT, CLOSED, reason, now, by)
