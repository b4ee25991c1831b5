# The warren CLI (setup, worker, api, ...) as an image; compose.yaml builds it for its services.
# Python 3.11.7 is the version the test suite runs on. Digest not recorded: the machines this was written on
# have no registry access; pin it where you build with
#   docker buildx imagetools inspect python:3.11.7-slim   ->   FROM python:3.11.7-slim@sha256:<digest>
FROM python:3.11.7-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY warren ./warren
# constraints.txt holds the exact versions the tests ran on (scripts/constraints writes it): a rebuild
# installs the same ones. The postgres extra is the PostgreSQL store of the receiving side (`warren inbox`); the
# otel extra exports traces when OTEL_* variables ask for it (docs/tracing.md).
RUN pip install -c constraints.txt ".[postgres,otel]" && useradd --system --uid 10001 --no-create-home warren

USER warren
WORKDIR /
# Ready, not just alive: the worker's /readyz (metrics_port 9464, as compose.yaml sets it) answers 200 only
# while it is connected and consuming. For `warren api` point it at the API: WARREN_HEALTHCHECK_URL.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ.get('WARREN_HEALTHCHECK_URL', 'http://127.0.0.1:9464/readyz'), timeout=4)"]
ENTRYPOINT ["warren"]
CMD ["--help"]
