"""``warren`` run another way, for side-by-side runs (bench/tracing.py): ``--source DIR`` runs the code of
another checkout (e.g. main, exported with ``git archive``) with this virtualenv's packages; ``--traced`` sets up
OpenTelemetry's SDK first, a BatchSpanProcessor into an InMemorySpanExporter (every span recorded and "exported",
nothing sent anywhere), so that what is measured is Warren's tracing, not a collector. The exporter is emptied
after each batch, counting what it got, as a real exporter keeps nothing (a run's every span held in memory
makes each pass of the garbage collector longer: about 10% more CPU per span in bench/tracing_micro.py's loop).

    .venv/bin/python bench/worker_variant.py [--source DIR | --traced] worker --config warren.toml
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Sequence


def traced() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class Emptied(InMemorySpanExporter):
        exported = 0

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            result = super().export(spans)
            Emptied.exported += len(self.get_finished_spans())
            self.clear()
            return result

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Emptied()))
    trace.set_tracer_provider(provider)

    def report() -> None:
        provider.force_flush()
        print(f"bench: {Emptied.exported} spans exported", file=sys.stderr, flush=True)

    atexit.register(report)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--source"]:
        sys.path.insert(0, args[1])
        args = args[2:]
    elif args[:1] == ["--traced"]:
        traced()
        args = args[1:]
    sys.argv = ["warren", *args]
    from warren.cli import main as warren

    print(f"bench: warren from {sys.modules['warren'].__file__}", file=sys.stderr, flush=True)
    warren()


if __name__ == "__main__":
    main()
