"""`memplane serve`: the gRPC server, on the embedded PostgreSQL and Redis unless configured."""
from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import NoReturn

from ..settings import Settings


def run(settings: Settings) -> NoReturn:
    from ..runtime import Embedded, serve
    from ..telemetry import shutdown_telemetry

    embedded = Embedded(settings)
    try:
        embedded.start()
        asyncio.run(serve(settings, embedded.database_url, embedded.redis_url, local_model=embedded.local_endpoint()))
    except KeyboardInterrupt:
        pass
    finally:
        embedded.stop()
    # Everything is closed above. The interpreter's own teardown of this heap (the model, grpc,
    # litellm) took 1-1.5 s on a loaded machine, which the shutdown grace cannot spare.
    shutdown_telemetry()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
