"""`memplane worker`: the background work (jobs, expiry sweep, turn windows) without gRPC, so it
scales apart from the servers; run with `MEMPLANE_BACKGROUND_WORK=none` on the servers."""
from __future__ import annotations

import asyncio
import logging
import os
import sys

from ..settings import Settings


def run(settings: Settings) -> int:
    # A worker must share the servers' database and Redis; an embedded pair of its own would be a
    # second, empty deployment.
    if not (settings.database_url and settings.redis_url):
        print("memplane worker needs MEMPLANE_DATABASE_URL and MEMPLANE_REDIS_URL (those of the servers)",
              file=sys.stderr)
        return 2
    if settings.workers < 1:
        print("memplane worker needs MEMPLANE_WORKERS >= 1 (job runners in this process)", file=sys.stderr)
        return 2
    from ..runtime import work
    from ..telemetry import shutdown_telemetry

    try:
        asyncio.run(work(settings))
    except KeyboardInterrupt:
        pass
    # As for serve: everything is closed; the interpreter's teardown of the model's heap would only
    # eat into the shutdown grace.
    shutdown_telemetry()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
