"""Endpoint health: circuit breaker, fleet-wide limits, auto-disable and operator events (docs/health.md).

Pure policy lives in ``records`` (the shared state and what it allows), ``breaker`` (when to open, how long to
wait) and ``limits`` (token bucket, fleet shares, ramp); ``guard`` applies them to one endpoint in one worker;
``state_store``, ``locks``, ``operator_events`` and ``control`` are the thin shells that talk to RabbitMQ.
"""
