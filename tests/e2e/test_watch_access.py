"""An open Watch holds only while its key may read: a revoked key or a removed domain grant ends
the stream within 2 s with the right status, and nothing committed after it is delivered."""
from __future__ import annotations

import time
import uuid

from memplane import AdminClient, MemoryClient
from memplane.errors import PermissionDeniedError, UnauthenticatedError
from tests.support.watching import Collector, started


def ended(c: Collector, timeout: float) -> float:
    """Seconds until the stream ended (fails after timeout)."""
    start = time.monotonic()
    c.thread.join(timeout)
    assert not c.thread.is_alive(), f"the stream was still open {timeout} s later"
    return time.monotonic() - start


def test_a_revoked_keys_open_watch_ends_and_gets_nothing_written_after(server, new_tenant):
    tenant, admin_key = new_tenant()
    with AdminClient(server.target, admin_key) as admin:
        reader = admin.create_api_key(tenant_id=tenant, role="reader")
    with MemoryClient(server.target, reader.secret) as watching, MemoryClient(server.target, admin_key) as writer:
        stream = Collector(watching)
        started(stream)
        before = writer.write_one("written while the key is valid", kind="event").id
        stream.wait(1)
        with AdminClient(server.target, admin_key) as admin:
            admin.revoke_api_key(reader.api_key.id)
        after = writer.write_one("written after the revocation", kind="event").id
        took = ended(stream, 10.0)
        assert isinstance(stream.error, UnauthenticatedError), stream.error
        assert [e.memory_id for e in stream.events()] == [before]
        assert after not in {e.memory_id for e in stream.events()}
        assert took < 3.0, took  # within the promised 2 s, plus a loaded machine's slack


def test_a_removed_domain_grant_ends_the_members_open_watch(server, platform_key, new_tenant):
    domain = f"watch-{uuid.uuid4().hex[:6]}"
    (a, key_a), (b, key_b) = new_tenant(), new_tenant()
    with AdminClient(server.target, platform_key) as admin:
        admin.create_domain(domain, description="")
        admin.grant_domain(domain, a, "read_write")
        admin.grant_domain(domain, b, "read")
    with MemoryClient(server.target, key_b) as watching, MemoryClient(server.target, key_a) as writer:
        stream = Collector(watching, scopes="domain")
        started(stream)
        shared = writer.write_one("shared while B is a member", kind="lesson", scope="domain", domain=domain).id
        stream.wait(1)
        with AdminClient(server.target, platform_key) as admin:
            admin.revoke_domain_grant(domain, b)
        later = writer.write_one("shared after B left", kind="lesson", scope="domain", domain=domain).id
        ended(stream, 10.0)
        assert isinstance(stream.error, PermissionDeniedError), stream.error
        assert stream.error.reason == "DOMAIN_GRANT_REMOVED"
        assert [e.memory_id for e in stream.events()] == [shared]
        assert later not in {e.memory_id for e in stream.events()}
