# One image for every ujobs service: `docker run IMAGE api`, `… worker --queues default`, ….
# The entrypoint is the `ujobs` CLI, so a compose `command:` is a ujobs subcommand.
FROM python:3.12-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml README.md ./
RUN mkdir -p shared services webhooks exports \
 && touch shared/__init__.py services/__init__.py webhooks/__init__.py exports/__init__.py \
 && pip install -e . \
 && rm -rf shared services webhooks exports

# The code and the schema. The install is editable because the named SQL statements and the
# migrations live in sql/ beside the packages, where shared.sql reads them.
COPY sql ./sql
COPY shared ./shared
COPY services ./services
COPY webhooks ./webhooks
COPY exports ./exports
RUN pip install --no-deps -e . \
 && useradd --system --uid 10001 --home-dir /app ujobs

USER ujobs
EXPOSE 8080
# exec form: the service is PID 1's only child, so SIGTERM reaches it and starts the drain.
ENTRYPOINT ["ujobs"]
CMD ["--help"]
