"""Read routing's handling of the caller's read position, before any database is asked."""
from __future__ import annotations

import pytest

from memplane_server.core.errors import Code, MemplaneError
from memplane_server.services.access.read_routing import ReadRouting
from memplane_server.stores.postgres.replica import ReadPools


@pytest.mark.parametrize("position", ["not-a-position", "0/", "/16B3748", "0/16B3748; DROP TABLE memories", "G/1"])
async def test_a_malformed_read_position_is_refused_as_invalid_argument(position):
    routing = ReadRouting(ReadPools(object(), object()), wait_ms=10)  # never reached: refused first
    with pytest.raises(MemplaneError) as refused:
        await routing.route(position)
    assert (refused.value.code, refused.value.reason) == (Code.INVALID_ARGUMENT, "INVALID_READ_POSITION")


def test_without_a_standby_routing_is_off():
    assert not ReadRouting(ReadPools(object()), wait_ms=10).enabled
