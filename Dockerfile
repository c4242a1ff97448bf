# A small image of the translator: slim Python, a non-root user, the translator as entrypoint.
#   docker build -t translator .
#   docker run --rm -i translator < events.ndjson
FROM python:3.11-slim

RUN useradd --create-home --uid 10001 translator
WORKDIR /src
COPY pyproject.toml README.md ./
COPY translator ./translator
RUN pip install --no-cache-dir . && rm -rf /src

USER translator
WORKDIR /home/translator
ENTRYPOINT ["translator"]
