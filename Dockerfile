# OpenDDB: a DynamoDB-compatible server. docs/CONTAINER.md shows docker run, docker-compose and Testcontainers.
#   docker build -t openddb .                               (the PostgreSQL driver too: --build-arg EXTRAS=postgres;
#                                                           encryption at rest: EXTRAS=encryption, or postgres,encryption)
#   docker run -p 8000:8000 -v openddb-data:/data openddb   (durable, in the volume /data)
#   docker run -p 8000:8000 openddb -inMemory               (DynamoDB Local's options work as its image's do)
FROM python:3.12-slim-bookworm

ARG EXTRAS=""

# Non-root. The working directory is DynamoDB Local's image's, so its `-dbPath ./data` means the same place.
RUN useradd --uid 1000 --user-group --no-create-home --home-dir /home/dynamodblocal --shell /usr/sbin/nologin openddb \
    && mkdir -p /data /home/dynamodblocal/data \
    && chown -R openddb:openddb /data /home/dynamodblocal

COPY pyproject.toml README.md /src/
COPY src /src/src
RUN pip install --no-cache-dir --disable-pip-version-check "/src${EXTRAS:+[$EXTRAS]}" && rm -rf /src

# Listen on every interface of the container; keep the store in the volume. Flags given to `docker run` (or a
# compose file's `command:`) come after `openddb serve` and override these.
ENV OPENDDB_HOST=0.0.0.0 \
    OPENDDB_PORT=8000 \
    OPENDDB_DATA_DIR=/data \
    PYTHONUNBUFFERED=1

USER openddb
WORKDIR /home/dynamodblocal
VOLUME ["/data"]
EXPOSE 8000

# `GET /` needs no signature; `openddb health` asks it on $OPENDDB_PORT (set that, not -port, to move the port).
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 CMD ["openddb", "health"]

ENTRYPOINT ["openddb", "serve"]
CMD []
