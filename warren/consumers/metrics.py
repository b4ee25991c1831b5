"""The worker's Prometheus metrics, fed by the delivery hooks: one AttemptRecord per attempt, one settlement
per message. Queue depths are not here: RabbitMQ's own Prometheus plugin exports those (port 15692).

Each worker has its own registry (not prometheus_client's global one), so several workers in one process,
as in the tests, never count into each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from warren.consumers.hooks import AttemptRecord, DeliveryHooks, Settlement
from warren.consumers.metric_cells import HistogramCells, Tallies, adder, setter

__all__ = ["ADMIN_STATES", "CIRCUIT_STATES", "OUTCOMES", "WorkerMetrics"]

OUTCOMES = ("delivered", "retry", "retry-in-place", "exhausted", "dead", "disabled", "parked")
# "discarded": a message an earlier, deleted endpoint of the same name moved, never delivered (admission.py)
# "parked": a shared lane's message moved through the delay chain untouched, so that the lane's head moves (lanes.py)
# "filtered": an event the endpoint's payload filter did not pass, never POSTed (admission.py)
SETTLEMENTS = ("acked", "retry-scheduled", "dead-lettered", "handed-back", "discarded", "parked", "filtered")
CIRCUIT_STATES = {"closed": 0, "half-open": 1, "open": 2}
ADMIN_STATES = ("active", "paused", "disabled")


class _InFlight(Collector):
    """``warren_in_flight``: read from the runners at scrape time, so it is never stale."""

    def __init__(self, source: Callable[[], Mapping[str, int]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "warren_in_flight", "Messages being delivered right now (held, not yet settled).", labels=["endpoint"]
        )
        for endpoint, count in sorted(self._source().items()):
            family.add_metric([endpoint], count)
        yield family


class _EndpointStates(Collector):
    """``warren_circuit_state`` and ``warren_endpoint_state``: the worker's view of each endpoint, at scrape time.

    ``source`` gives endpoint -> (circuit state, admin state), as the worker's health control holds them.
    """

    def __init__(self, source: Callable[[], Mapping[str, tuple[str, str]]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        circuit = GaugeMetricFamily(
            "warren_circuit_state", "Circuit breaker per endpoint: 0 closed, 1 half-open, 2 open.", labels=["endpoint"]
        )
        admin = GaugeMetricFamily(
            "warren_endpoint_state",
            "1 for the endpoint's operator state (active, paused, disabled), 0 for the others.",
            labels=["endpoint", "state"],
        )
        for endpoint, (circuit_state, admin_state) in sorted(self._source().items()):
            if circuit_state in CIRCUIT_STATES:
                circuit.add_metric([endpoint], CIRCUIT_STATES[circuit_state])
            for state in ADMIN_STATES:
                admin.add_metric([endpoint, state], 1 if state == admin_state else 0)
        yield circuit
        yield admin


class _AttemptLog(Collector):
    """``warren_attempt_records_dropped_total`` and ``warren_attempt_records_buffered``, read from the attempt
    recorder at scrape time. ``source`` gives (dropped so far, buffered now)."""

    def __init__(self, source: Callable[[], tuple[int, int]]) -> None:
        self._source = source

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        dropped, buffered = self._source()
        yield CounterMetricFamily(
            "warren_attempt_records_dropped",
            "Attempt records dropped because the worker's buffer was full (RabbitMQ away too long).",
            value=dropped,
        )
        yield GaugeMetricFamily(
            "warren_attempt_records_buffered", "Attempt records waiting to be published.", value=buffered
        )


class _AttemptCells:
    """The value cells one endpoint's attempts move: one look-up an attempt, not one a cell. A series still appears
    when it first moves: the age's, the in-place retries' and each outcome's cells are made on first use."""

    __slots__ = ("age", "attempts", "in_place", "last_age", "number", "request")

    def __init__(self, number: HistogramCells, request: HistogramCells, last_age: Callable[[float], None]) -> None:
        self.number, self.request, self.last_age = number, request, last_age
        self.attempts: dict[str, Callable[[float], None]] = {}  # outcome -> its counter's cell
        self.age: HistogramCells | None = None
        self.in_place: Callable[[float], None] | None = None

    def aged(self, cells: HistogramCells) -> HistogramCells:
        self.age = cells
        return cells

    def placed(self, cell: Callable[[float], None]) -> Callable[[float], None]:
        self.in_place = cell
        return cell


class _Fold(Collector):
    """The tallied metrics, registered as one collector: reading them writes the tallies to their cells first. It
    owns their names, so a read restricted to some names (``registry.restricted_registry``, ``name[]``) folds too."""

    def __init__(self, tallies: Tallies, metrics: Iterable[Collector]) -> None:
        self._tallies, self._metrics = tallies, tuple(metrics)

    def describe(self) -> Iterator[Metric]:
        for metric in self._metrics:
            yield from metric.describe()  # type: ignore[attr-defined]

    def collect(self) -> Iterator[Metric]:
        self._tallies.fold()
        for metric in self._metrics:
            yield from metric.collect()


class _Tallied:
    """Where one endpoint's attempts move their numbers in ``Tallies.values``: the attempt number's and the
    request's histograms (sum, first bucket, bounds), the last age's gauge, each outcome's counter, and the age's
    histogram and the in-place retries' counter once they first move (a series appears when it first moves)."""

    __slots__ = ("age", "attempts", "in_place", "last_age", "number", "request")

    def __init__(self, number: tuple[int, int, list[float]], request: tuple[int, int, list[float]], last_age: int):
        self.number, self.request, self.last_age = number, request, last_age
        self.attempts: dict[str, int] = {}
        self.age: tuple[int, int, list[float]] | None = None
        self.in_place: int | None = None


class WorkerMetrics:
    """Every metric of one worker. ``install(hooks)`` connects it; ``registry`` is what ``/metrics`` serves."""

    def __init__(
        self,
        endpoints: Iterable[str] = (),
        registry: CollectorRegistry | None = None,
        series: Callable[[str], str] | None = None,
    ) -> None:
        """``series`` names the series an endpoint's attempts and settlements count in (``worker.metrics_lane_
        endpoints = "by-lane"``: a lane endpoint's are its lane's, "(lane N)"); by default, its own name."""
        self.registry = registry or CollectorRegistry()
        # The per-attempt cells moved as plain numbers (metric_cells.Tallies), when this prometheus_client has them.
        self._tallies = (
            Tallies() if Tallies.usable(Counter("c", "c", registry=None), Histogram("h", "h", registry=None)) else None
        )
        self._tallied: dict[str, _Tallied] = {}
        self._counted: dict[str, dict[str, int]] = {}  # endpoint -> how -> its settlement counter's index
        # What an attempt and a settlement move: through the tallies, or else each cell's own call.
        self.observe: Callable[[AttemptRecord], None] = (
            self._observe_cells if self._tallies is None else self._observe_tallied
        )
        self.settle: Callable[[str, Settlement], None] = (
            self._settle_cells if self._tallies is None else self._settle_tallied
        )
        if series is not None:  # the same, each endpoint's numbers in its series
            self._series = series
            self._observe_as: Callable[[AttemptRecord, str], None] = self.observe
            self._settle_as = self.settle
            self.observe, self.settle = self._observe_in_series, self._settle_in_series
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}  # (metric, labels) -> child: see _child
        self._cells: dict[tuple[str, str, str], Any] = {}  # (kind, endpoint, label) -> value cell: see _cell
        self._by_endpoint: dict[str, _AttemptCells] = {}  # the cells of each endpoint's attempts, found at once
        self._settled: dict[str, dict[str, Callable[[float], None]]] = {}  # endpoint -> how -> its counter's cell
        r = self.registry
        t = None if self._tallies is not None else r  # the tallied metrics: registered through _Fold below
        self.attempts = Counter(
            "warren_delivery_attempts",
            "HTTP delivery attempts, by endpoint and outcome "
            "(delivered, retry, retry-in-place, exhausted, dead, disabled, parked).",
            ["endpoint", "outcome"],
            registry=t,
        )
        self.attempt_number = Histogram(
            "warren_delivery_attempt_number",
            "The number of each attempt made (1 = first try): how far into their retry budget deliveries go.",
            ["endpoint"],
            buckets=(1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100),
            registry=t,
        )
        self.request_seconds = Histogram(
            "warren_request_duration_seconds",
            "Duration of the HTTP request of each attempt.",
            ["endpoint"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=t,
        )
        self.age_seconds = Histogram(
            "warren_delivery_age_seconds",
            "End to end: seconds from publish (or replay) to the successful delivery.",
            ["endpoint"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 6 * 3600, 86400, 3 * 86400),
            registry=t,
        )
        self.last_age = Gauge(
            "warren_last_attempt_age_seconds",
            "Age of the message most recently attempted (for an ordered partition: its head).",
            ["endpoint"],
            registry=t,
        )
        self.retries = Counter(
            "warren_retries_scheduled",
            "Retries scheduled: into the delay chain (confirmed), or held in place for an ordered endpoint.",
            ["endpoint", "where"],
            registry=t,
        )
        self.dead = Counter(
            "warren_dead_lettered", "Messages moved to the endpoint's DLQ (confirmed).", ["endpoint"], registry=r
        )
        self.settlements = Counter(
            "warren_settlements",
            "How messages left the worker: acked, retry-scheduled, dead-lettered, handed-back, parked (a shared "
            "lane's surplus), discarded (moved by an earlier, deleted endpoint of the same name), filtered (its "
            "payload filter did not pass).",
            ["endpoint", "how"],
            registry=t,
        )
        self.filtered = Counter(
            "warren_filtered",
            "Events the endpoint's payload filter did not pass: never POSTed (a lane endpoint's get no copy).",
            ["endpoint"],
            registry=r,
        )
        self.confirms = Counter(
            "warren_publish_confirms",
            "Publisher confirms the worker received for its own publishes (target: delay chain or DLQ).",
            ["endpoint", "target"],
            registry=r,
        )
        self.ready = Gauge("warren_worker_ready", "1 when the worker is connected and consuming.", registry=r)
        if self._tallies is not None:
            tallied = (self.attempts, self.attempt_number, self.request_seconds, self.age_seconds, self.last_age)
            self.registry.register(_Fold(self._tallies, (*tallied, self.retries, self.settlements)))
        self._kinds: dict[str, tuple[Any, Callable[[Any], Any]]] = {
            "attempts": (self.attempts, adder),
            "number": (self.attempt_number, HistogramCells),
            "request": (self.request_seconds, HistogramCells),
            "age": (self.age_seconds, HistogramCells),
            "last-age": (self.last_age, setter),
            "retries": (self.retries, adder),
            "settlements": (self.settlements, adder),
        }
        for endpoint in endpoints:
            # Present from the start at 0, so that rate() and increase() see the first event.
            for outcome in OUTCOMES:
                self.attempts.labels(endpoint, outcome)
            for how in SETTLEMENTS:
                self.settlements.labels(endpoint, how)
            for where in ("delay-chain", "in-place"):
                self.retries.labels(endpoint, where)
            for target in ("delay", "dead"):
                self.confirms.labels(endpoint, target)
            self.dead.labels(endpoint)
            self.filtered.labels(endpoint)

    def install(self, hooks: DeliveryHooks) -> None:
        hooks.observers.append(self.observe)
        hooks.settlements.append(self.settle)

    def track_in_flight(self, source: Callable[[], Mapping[str, int]]) -> None:
        self.registry.register(_InFlight(source))

    def track_endpoint_states(self, source: Callable[[], Mapping[str, tuple[str, str]]]) -> None:
        self.registry.register(_EndpointStates(source))

    def track_attempt_log(self, source: Callable[[], tuple[int, int]]) -> None:
        self.registry.register(_AttemptLog(source))

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once: labels() takes a lock and builds a key on every call."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _cell(self, kind: str, endpoint: str, label: str = "") -> Any:
        """The value cell (warren/consumers/metric_cells.py) that ``observe`` and ``settle`` update, made on first
        use, when the child itself is (a series appears when it first moves, as through ``labels()``)."""
        key = (kind, endpoint, label)
        cell = self._cells.get(key)
        if cell is None:
            metric, make = self._kinds[kind]
            labels = (endpoint, label) if label else (endpoint,)
            cell = self._cells[key] = make(self._child(metric, *labels))
        return cell

    def _attempt_cells(self, endpoint: str) -> _AttemptCells:
        cells = self._by_endpoint[endpoint] = _AttemptCells(
            self._cell("number", endpoint), self._cell("request", endpoint), self._cell("last-age", endpoint)
        )
        return cells

    def _observe_in_series(self, record: AttemptRecord) -> None:
        self._observe_as(record, self._series(record.endpoint))

    def _settle_in_series(self, endpoint: str, how: Settlement) -> None:
        self._settle_as(self._series(endpoint), how)

    def _observe_cells(self, record: AttemptRecord, endpoint: str | None = None) -> None:
        endpoint, outcome = endpoint or record.endpoint, record.outcome
        cells = self._by_endpoint.get(endpoint) or self._attempt_cells(endpoint)
        attempts = cells.attempts
        (attempts.get(outcome) or attempts.setdefault(outcome, self._cell("attempts", endpoint, outcome)))(1)
        cells.number.observe(record.attempt)
        cells.request.observe(record.duration)
        cells.last_age(record.age)
        if outcome == "delivered":
            (cells.age or cells.aged(self._cell("age", endpoint))).observe(record.age)
        elif outcome == "retry-in-place":
            (cells.in_place or cells.placed(self._cell("retries", endpoint, "in-place")))(1)

    def _settle_cells(self, endpoint: str, how: Settlement) -> None:
        cells = self._settled.get(endpoint) or self._settled.setdefault(endpoint, {})
        (cells.get(how) or cells.setdefault(how, self._cell("settlements", endpoint, how)))(1)
        self._moved(endpoint, how)

    def _moved(self, endpoint: str, how: Settlement) -> None:
        child = self._child
        # A move is settled only after RabbitMQ confirmed the copy: each one is a confirm received.
        if how == "retry-scheduled":
            child(self.retries, endpoint, "delay-chain").inc()
            child(self.confirms, endpoint, "delay").inc()
        elif how == "dead-lettered":
            child(self.dead, endpoint).inc()
            child(self.confirms, endpoint, "dead").inc()
        elif how == "filtered":
            child(self.filtered, endpoint).inc()

    # --- the same, through the tallies (metric_cells.Tallies): what install() connects when they are usable ---
    def _tallied_of(self, endpoint: str) -> _Tallied:
        tallies, child = self._tallies, self._child
        assert tallies is not None
        cells = self._tallied[endpoint] = _Tallied(
            tallies.histogram(child(self.attempt_number, endpoint)),
            tallies.histogram(child(self.request_seconds, endpoint)),
            tallies.count(child(self.last_age, endpoint)),
        )
        return cells

    def _observe_tallied(self, record: AttemptRecord, endpoint: str | None = None) -> None:
        """``_observe_cells``, moving the tallies' numbers in place."""
        endpoint, outcome = endpoint or record.endpoint, record.outcome
        cells = self._tallied.get(endpoint) or self._tallied_of(endpoint)
        tallies = self._tallies
        assert tallies is not None  # __init__ chose this method only with them
        values = tallies.values
        at = cells.attempts.get(outcome)
        if at is None:
            at = cells.attempts[outcome] = tallies.count(self._child(self.attempts, endpoint, outcome))
        values[at] += 1
        tallies.observe(cells.number, record.attempt)
        tallies.observe(cells.request, record.duration)
        values[cells.last_age] = record.age
        if outcome == "delivered":
            if cells.age is None:
                cells.age = tallies.histogram(self._child(self.age_seconds, endpoint))
            tallies.observe(cells.age, record.age)
        elif outcome == "retry-in-place":
            if cells.in_place is None:
                cells.in_place = tallies.count(self._child(self.retries, endpoint, "in-place"))
            values[cells.in_place] += 1

    def _settle_tallied(self, endpoint: str, how: Settlement) -> None:
        """``_settle_cells``, the settlement's counter moved in place (the rarer moves' counters as there)."""
        counted = self._counted.get(endpoint) or self._counted.setdefault(endpoint, {})
        at = counted.get(how)
        if at is None:
            at = counted[how] = self._tallies.count(self._child(self.settlements, endpoint, how))  # type: ignore[union-attr]
        self._tallies.values[at] += 1  # type: ignore[union-attr]
        self._moved(endpoint, how)
