"""``warren`` run another way, for side-by-side runs (bench/tracing.py): ``--source DIR`` runs the code of
another checkout (e.g. main, exported with ``git archive``) with this virtualenv's packages; ``--traced`` sets up
OpenTelemetry's SDK first, a BatchSpanProcessor into an InMemorySpanExporter (every span recorded and "exported",
nothing sent anywhere), so that what is measured is Warren's tracing, not a collector. The exporter is emptied
after each batch, counting what it got, as a real exporter keeps nothing (a run's every span held in memory
makes each pass of the garbage collector longer: about 10% more CPU per span in bench/tracing_micro.py's loop).

    .venv/bin/python bench/worker_variant.py [--loop-lag FILE] [--source DIR | --traced] worker --config warren.toml

``--loop-lag FILE`` samples the worker's event loop (how late a 10 ms sleep wakes), a line per second in FILE.
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


SAMPLERS: list[object] = []


def loop_lag(out: str) -> None:
    """Sample the worker's event loop: a task that sleeps 10 ms, and how late each wake-up came, per second of the
    clock: ``epoch_second samples max_ms p99_ms late_50ms`` (bench/loop_lag.py reads it)."""
    import asyncio
    import os
    import time

    from warren import loop as warren_loop

    factory = warren_loop.loop_factory() or asyncio.new_event_loop

    lag_file = open(out, "a", buffering=1)  # noqa: SIM115 (open for the process's life)

    async def sample() -> None:
        second, lags = int(time.time()), []
        while True:
            began = time.perf_counter()
            await asyncio.sleep(0.01)
            beat[0] = time.perf_counter()
            lags.append((time.perf_counter() - began - 0.01) * 1000)
            if (now := int(time.time())) != second:
                lags.sort()
                late = sum(1 for lag in lags if lag >= 50)
                p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
                lag_file.write(f"{second} {len(lags)} {lags[-1]:.1f} {p99:.1f} {late}\n")
                second, lags = now, []

    beat = [time.perf_counter()]

    def watchdog() -> None:
        """While the loop's sampler has not woken for 40 ms, what the loop's thread runs: its stack, every 20 ms
        (WARREN_BENCH_STALL_STACKS)."""
        import sys
        import threading
        import traceback

        main = threading.main_thread().ident
        with open(out + ".stacks", "a", buffering=1) as file:
            while True:
                time.sleep(0.02)
                stalled = time.perf_counter() - beat[0]
                if stalled >= 0.04 and main is not None and (frame := sys._current_frames().get(main)) is not None:
                    stack = "".join(traceback.format_stack(frame)[-14:])
                    file.write(f"--- {time.time():.3f} stalled {stalled * 1000:.0f} ms\n{stack}")

    if os.environ.get("WARREN_BENCH_GC_LOG"):  # each garbage collection of 10 ms or more: when, generation, ms
        import gc

        gc_file = open(out + ".gc", "a", buffering=1)  # noqa: SIM115 (open for the process's life)
        gc_began = [0.0]

        def on_gc(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                gc_began[0] = time.perf_counter()
            elif (took := time.perf_counter() - gc_began[0]) >= 0.01:
                gc_file.write(f"{time.time():.3f} gen{info['generation']} {took * 1000:.0f} ms {info['collected']}\n")

        gc.callbacks.append(on_gc)

    if os.environ.get("WARREN_BENCH_STALL_STACKS"):
        import threading

        threading.Thread(target=watchdog, daemon=True).start()

    def sampled() -> asyncio.AbstractEventLoop:
        created = factory()
        if slow := os.environ.get("WARREN_BENCH_SLOW_CALLBACK_MS"):  # debug mode: callbacks over it are logged
            created.set_debug(True)
            created.slow_callback_duration = float(slow) / 1000
        SAMPLERS.append(created.create_task(sample()))  # held: a loop keeps only weak references to its tasks
        return created

    warren_loop.loop_factory = lambda: sampled


def main() -> None:
    args = sys.argv[1:]
    lag_file = None
    if args[:1] == ["--loop-lag"]:
        lag_file, args = args[1], args[2:]
    if args[:1] == ["--source"]:
        sys.path.insert(0, args[1])
        args = args[2:]
    elif args[:1] == ["--traced"]:
        traced()
        args = args[1:]
    if lag_file is not None:
        loop_lag(lag_file)  # after --source: the loop module of the code measured
    sys.argv = ["warren", *args]
    from warren.cli import main as warren

    print(f"bench: warren from {sys.modules['warren'].__file__}", file=sys.stderr, flush=True)
    warren()


if __name__ == "__main__":
    main()
