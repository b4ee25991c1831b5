"""Which tracer Warren records with, if any: the one cheap check every delivery makes (``active_tracer``).

A tracer is in use when a tracer provider other than the API's default (a no-op proxy) is set: by ``sdk.py`` from
the ``OTEL_*`` variables, by an application embedding Warren that set its own global provider before starting
the worker, or explicitly with ``use`` (tests). The worker resolves it once per endpoint (``resolve``), so a
delivery reads one attribute; a producer's ``Publisher`` looks again on each publish until it finds one.
"""

from __future__ import annotations

from opentelemetry import trace

__all__ = ["active_tracer", "resolve", "tracer", "use"]

INSTRUMENTATION = "warren"


class _State:
    __slots__ = ("explicit", "tracer")

    def __init__(self) -> None:
        self.tracer: trace.Tracer | None = None
        self.explicit = False  # set by use(): resolve() leaves it alone


_STATE = _State()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("warren-webhooks")
    except PackageNotFoundError:
        return "0"


def use(provider: trace.TracerProvider | None) -> None:
    """Record with this provider's tracer (None: record nothing), whatever the global provider is."""
    _STATE.tracer = None if provider is None else provider.get_tracer(INSTRUMENTATION, _version())
    _STATE.explicit = provider is not None


def resolve() -> trace.Tracer | None:
    """The tracer of the global provider when one is set (not the API's no-op proxy), remembered; else None."""
    if _STATE.tracer is not None or _STATE.explicit:
        return _STATE.tracer
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    _STATE.tracer = provider.get_tracer(INSTRUMENTATION, _version())
    return _STATE.tracer


def active_tracer() -> trace.Tracer | None:
    """The tracer resolved so far (None: tracing is off). One attribute read: the per-delivery check."""
    return _STATE.tracer


def tracer() -> trace.Tracer | None:
    """The tracer to record with now, looking for a global provider set since the last call."""
    return _STATE.tracer if _STATE.tracer is not None else resolve()
