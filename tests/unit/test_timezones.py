from datetime import datetime, timezone

import pytest

from memplane_server.core.errors import MemplaneError
from memplane_server.core.timezones import parse_time_zone, render


def test_known_zone_renders_local_time():
    moment = datetime(2026, 5, 1, 12, 30, tzinfo=timezone.utc)
    assert render(moment, parse_time_zone("Asia/Shanghai")) == "2026-05-01 20:30 CST"


def test_no_zone_renders_utc():
    assert render(datetime(2026, 5, 1, 12, 30, tzinfo=timezone.utc), parse_time_zone("")) == "2026-05-01 12:30 UTC"


@pytest.mark.parametrize("name", ["Mars/Olympus", "../etc/passwd", "Asia/"])
def test_unknown_zone_is_invalid_argument(name):
    with pytest.raises(MemplaneError) as err:
        parse_time_zone(name)
    assert err.value.reason == "INVALID_TIME_ZONE"


@pytest.mark.parametrize("name", ["x" * 100_000, "é" * 129, "Asia", "Asia/Shanghai\x00", "😀" * 100])
def test_names_the_file_system_refuses_are_invalid_argument_too(name):
    # A long name was an OSError (file name too long) and "Asia" an IsADirectoryError: INTERNAL.
    with pytest.raises(MemplaneError) as err:
        parse_time_zone(name)
    assert err.value.reason == "INVALID_TIME_ZONE"
    assert len(err.value.message) < 200
