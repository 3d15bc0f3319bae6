# The Agent-Reach coordinator: `docker build -t agent-reach .` at the repository root.
# Slim Python, the package installed from this checkout (with the OTLP exporter), run as
# an unprivileged user. Settings come from AR_* variables (docs/configuration.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install ".[otel]" && rm -rf /app/src \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin agent-reach

USER 10001
# Inside a container the coordinator must listen beyond loopback.
ENV AR_HOST=0.0.0.0 \
    AR_PORT=8500
EXPOSE 8500

# The standard library only: the slim image has no curl.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('AR_PORT', '8500') + '/healthz', timeout=2)"]

ENTRYPOINT ["agent-reach", "serve"]
