# The warren CLI (setup, worker, ...) as an image; compose.yaml builds it for its `setup` and `worker` services.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY topology ./topology
COPY broker ./broker
COPY consumers ./consumers
COPY warren ./warren
RUN pip install . && useradd --system --uid 10001 --no-create-home warren

USER warren
WORKDIR /
ENTRYPOINT ["warren"]
CMD ["--help"]
