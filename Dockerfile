# A small image of the translator: slim Python, a non-root user, the translator as entrypoint.
#   docker build -t translator .
#   docker run --rm -i translator < events.ndjson
FROM python:3.11-slim

RUN useradd --create-home --uid 10001 translator
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY translator ./translator
COPY docs ./docs
RUN pip install --no-cache-dir . && rm -rf /src

USER translator
WORKDIR /home/translator
# Long-running modes serve /metrics and /healthz with --metrics tcp:0.0.0.0:9464 (the compose
# files do). The slim image has no curl: Python's urllib probes it (a 503 or no answer raises,
# exit 1 = unhealthy).
EXPOSE 9464
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:9464/healthz', timeout=4)"]
ENTRYPOINT ["translator"]
