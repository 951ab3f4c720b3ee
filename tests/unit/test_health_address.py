"""`memplane health` dials loopback for a server bound to every interface (as in a container)."""
from __future__ import annotations

import pytest

from memplane_server.commands.health import probe_address


@pytest.mark.parametrize(("listen", "dialled"), [
    ("0.0.0.0:50051", "127.0.0.1:50051"),
    ("[::]:50051", "[::1]:50051"),
    (":50051", "127.0.0.1:50051"),
    ("10.1.2.3:7000", "10.1.2.3:7000"),
    ("memplane.svc:50051", "memplane.svc:50051"),
])
def test_wildcard_hosts_are_dialled_on_loopback(listen, dialled):
    assert probe_address(listen) == dialled
