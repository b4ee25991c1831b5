"""Setting up OpenTelemetry's SDK from the standard ``OTEL_*`` variables, for ``warren worker``, ``warren api`` and
``warren publish`` (docs/tracing.md). The SDK and the OTLP exporter are the ``otel`` extra.

The SDK is set up when an exporter is asked for: ``OTEL_TRACES_EXPORTER`` names one (``otlp``, ``console``; not
``none``) or an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``),
and ``OTEL_SDK_DISABLED`` is not ``true``. Having the extra installed is not enough, so that a machine with the
SDK installed for another reason does not start sending spans to localhost:4318. An application that set its own
global tracer provider keeps it: Warren records with that one. The SDK reads the rest itself (the sampler from
``OTEL_TRACES_SAMPLER``, the resource from ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``, the batch
processor's ``OTEL_BSP_*``, the exporter's ``OTEL_EXPORTER_OTLP_*``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace

from warren.tracing.state import resolve, use

__all__ = ["asked", "configure", "exporter_names", "process_tracing"]

log = logging.getLogger("warren.tracing")

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def exporter_names(env: Mapping[str, str]) -> list[str]:
    """The exporters asked for, lowercase, without ``none``: ``OTEL_TRACES_EXPORTER``, or ``otlp`` when only an
    OTLP endpoint is set. Empty: set up nothing."""
    if _true(env.get("OTEL_SDK_DISABLED")):
        return []
    named = env.get("OTEL_TRACES_EXPORTER")
    if named is not None and named.strip():
        return [n for n in (part.strip().lower() for part in named.split(",")) if n and n != "none"]
    return ["otlp"] if any(env.get(name) for name in ENDPOINT_VARIABLES) else []


def asked(env: Mapping[str, str] | None = None) -> bool:
    return bool(exporter_names(os.environ if env is None else env))


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        log.warning("OTEL_TRACES_EXPORTER names %r, which Warren does not know (otlp, console, none): ignored", name)
        return None
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    if protocol.strip().lower() == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError:
            log.warning("OTLP over gRPC needs opentelemetry-exporter-otlp-proto-grpc installed: no traces exported")
            return None
        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def configure(service_name: str, env: Mapping[str, str] | None = None) -> Callable[[], None] | None:
    """Set up the SDK when the environment asks for traces (the module's docstring); return its shutdown (which
    exports what is left), or None when nothing was set up here."""
    env = os.environ if env is None else env
    names = exporter_names(env)
    if not names or resolve() is not None:  # nothing asked, or the application set its own provider
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_* variables ask for traces, but the SDK is not installed: pip install warren-webhooks[otel]")
        return None
    resource = Resource.create()
    if not env.get("OTEL_SERVICE_NAME") and "service.name=" not in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    provider = TracerProvider(resource=resource)
    exporters = [e for e in (_exporter(name, env) for name in names) if e is not None]
    if not exporters:
        return None
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    use(provider)
    log.info("tracing on: exporting spans with %s", ", ".join(names), extra={"service": service_name})
    return provider.shutdown


@contextmanager
def process_tracing(service_name: str) -> Iterator[None]:
    """Tracing for one command's process: the SDK set up as ``configure`` decides, shut down (flushed) at the end."""
    shutdown = configure(service_name)
    try:
        yield
    finally:
        if shutdown is not None:
            shutdown()
