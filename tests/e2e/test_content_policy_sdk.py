"""Content policies through the SDK and the CLI against a `memplane serve` process: get, set and a
dry-run scan with the sync and async admin clients; a refused write is a typed InvalidArgumentError
carrying CONTENT_POLICY with the detector and field and without the match; a domain's policy needs a
platform admin key."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest

from memplane import AdminClient, AsyncAdminClient, ContentAction, MemoryClient
from memplane.errors import InvalidArgumentError, PermissionDeniedError

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example key


def test_set_get_and_a_refused_write_through_the_sdk(server, new_tenant):
    tenant, key = new_tenant()
    with AdminClient(server.target, key) as admin:
        defaults = admin.get_content_policy()
        assert not defaults.is_set and defaults.effective["aws_access_key"] is ContentAction.REDACT
        assert defaults.effective["email"] is ContentAction.TAG
        stored = admin.set_content_policy({"secret": "refuse", "email": ContentAction.REDACT})
    assert stored.is_set and stored.tenant_id == tenant and stored.updated_by
    assert stored.rules == {"secret": ContentAction.REFUSE, "email": ContentAction.REDACT}
    assert stored.effective["github_token"] is ContentAction.REFUSE

    with MemoryClient(server.target, key) as client:
        with pytest.raises(InvalidArgumentError) as caught:
            client.write([{"content": "fine", "kind": "fact"}, {"content": f"key {AWS_KEY}", "kind": "fact"}])
        [redacted] = client.write([{"content": "write to ops@example.com", "kind": "fact"}]).memories
    err = caught.value
    assert err.reason == "CONTENT_POLICY" and AWS_KEY not in str(err)
    assert err.metadata == {"detector": "aws_access_key", "field": "content", "index": "1"}
    assert redacted.content == "write to [REDACTED:email]"


def test_the_async_client_scans_without_changing_anything(server, new_tenant):
    _, key = new_tenant()
    with MemoryClient(server.target, key) as client:
        [tagged] = client.write([{"content": "mail ops@example.com", "kind": "fact"}]).memories

    async def go():
        async with AsyncAdminClient(server.target, key) as admin:
            return await admin.scan_content_policy({"email": "refuse"}), await admin.scan_content_policy()

    proposed, current = asyncio.run(go())
    assert proposed.examined == 1 and proposed.refused == 1 and proposed.refused_memory_ids == (tagged.id,)
    assert proposed.counts == {("email", ContentAction.REFUSE): 1}
    assert current.refused == 0 and current.tagged == 0  # tagged already when it was written
    with MemoryClient(server.target, key) as client:
        assert client.get_memory(tagged.id).content == "mail ops@example.com"


def test_a_domain_policy_needs_a_platform_admin(server, new_tenant, platform_key):
    _, key = new_tenant()
    domain = f"d-{uuid.uuid4().hex[:8]}"
    with AdminClient(server.target, platform_key) as platform:
        platform.create_domain(domain)
        stored = platform.set_content_policy({"personal": "refuse"}, domain=domain)
    assert stored.domain == domain and stored.effective["phone"] is ContentAction.REFUSE
    with AdminClient(server.target, key) as admin, pytest.raises(PermissionDeniedError):
        admin.set_content_policy({"personal": "off"}, domain=domain)


def test_the_cli_sets_rules_and_reports_a_scan(server, new_tenant):
    _, key = new_tenant()
    env = {**os.environ, "MEMPLANE_API_KEY": key}

    def cli(*args: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "memplane_server.cli", "admin", "content-policy", *args,
                              "--target", server.target], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    stored = cli("set", "--rule", "phone=refuse", "--rule", "secret=tag")
    assert stored["rules"] == {"phone": "refuse", "secret": "tag"} and stored["effective"]["jwt"] == "tag"
    assert cli("get")["is_set"] is True
    report = cli("scan", "--rule", "email=refuse")
    assert report["examined"] == 0 and report["counts"] == []
