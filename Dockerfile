# One image for every ujobs service: `docker run IMAGE api`, `… worker --queues default`, ….
# The entrypoint is the `ujobs` CLI, so a compose `command:` is a ujobs subcommand. The app's
# code is mounted at /srv/app (the working directory, which `--app`/UJOBS_APP imports from),
# or an app image builds `FROM ultimate-jobs:local` and copies itself there.
FROM python:3.12-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first (read from pyproject.toml), so a code change does not reinstall them.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print(chr(10).join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt

# The code and the schema, installed as a wheel would be: sql/ ships inside it as ujobs/_sql.
COPY sql ./sql
COPY shared ./shared
COPY services ./services
COPY webhooks ./webhooks
COPY exports ./exports
RUN pip install --no-deps . \
 && rm -rf /app/sql /app/shared /app/services /app/webhooks /app/exports /app/build \
 && useradd --system --uid 10001 --home-dir /app ujobs \
 && mkdir -p /srv/app /srv/exports \
 && chown ujobs /srv/exports \
 && install -d -o ujobs -m 0700 /run/ujobs-key

# /srv/exports is where compose mounts the exports volume: a new named volume takes the owner of
# the directory it is mounted over, so the exporter (running as ujobs) can write its parts there.
WORKDIR /srv/app

# /run/ujobs-key is the key volume's mount point (compose.yaml's keygen): a fresh named volume
# takes this directory's owner and mode, so the key written there is the ujobs user's alone.
USER ujobs
# 8080: the api; 9464: /metrics, /healthz, /readyz of every other service.
EXPOSE 8080 9464
# exec form: the service is PID 1's only child, so SIGTERM reaches it and starts the drain.
ENTRYPOINT ["ujobs"]
CMD ["--help"]
