"""Content policies through the SDK and the CLI against a `memplane serve` process: get, set and a
dry-run scan with the sync and async admin clients; a refused write is a typed InvalidArgumentError
carrying CONTENT_POLICY with the detector and field and without the match; a domain's policy needs a
platform admin key; a set without rules is refused (a reset is its own request); a long bad
name comes back as a short INVALID_ARGUMENT."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import grpc
import pytest

from memplane import AdminClient, AsyncAdminClient, ContentAction, MemoryClient
from memplane.errors import InvalidArgumentError, PermissionDeniedError, from_rpc_error
from memplane.v1 import admin_service_pb2 as a
from memplane.v1 import admin_service_pb2_grpc as a_grpc

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


def test_a_set_without_rules_is_refused_and_a_reset_is_asked_for_by_name(server, new_tenant):
    _, key = new_tenant()
    with AdminClient(server.target, key) as admin, grpc.insecure_channel(server.target) as channel:
        admin.set_content_policy({"personal": "redact"})
        # Accepted before: a request that lost its policy dropped every rule (personal data back to tag).
        stub = a_grpc.AdminServiceStub(channel)
        for request in (a.SetContentPolicyRequest(), a.SetContentPolicyRequest(policy=a.ContentPolicy())):
            with pytest.raises(grpc.RpcError) as raw:
                stub.SetContentPolicy(request, metadata=[("authorization", f"Bearer {key}")])
            assert raw.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert from_rpc_error(raw.value).reason == "CONTENT_POLICY_REQUIRED"
        with pytest.raises(InvalidArgumentError) as empty:
            admin.set_content_policy({})
        assert empty.value.reason == "CONTENT_POLICY_REQUIRED"
        both = a.SetContentPolicyRequest(policy=a.ContentPolicy(rules=[a.ContentRule(
            name="email", action=a.CONTENT_ACTION_REFUSE)]), reset=True)
        with pytest.raises(grpc.RpcError) as raw:
            stub.SetContentPolicy(both, metadata=[("authorization", f"Bearer {key}")])
        assert from_rpc_error(raw.value).reason == "RESET_WITH_RULES"
        kept = admin.get_content_policy()
        assert kept.rules == {"personal": ContentAction.REDACT} and kept.effective["phone"] is ContentAction.REDACT

        reset = admin.reset_content_policy()
    assert reset.rules == {} and reset.effective["phone"] is ContentAction.TAG and reset.updated_by

    async def reset_async():
        async with AsyncAdminClient(server.target, key) as admin:
            await admin.set_content_policy({"email": "refuse"})
            return await admin.reset_content_policy()

    assert asyncio.run(reset_async()).rules == {}


@pytest.mark.parametrize("size", [5_000, 20_000])
def test_a_long_detector_name_is_invalid_argument_with_a_short_message(server, new_tenant, size):
    # 5 KB came back whole in the message; from about 10 KB the client failed with RESOURCE_EXHAUSTED.
    _, key = new_tenant()
    with AdminClient(server.target, key) as admin, pytest.raises(InvalidArgumentError) as caught:
        admin.set_content_policy({"d" * size: "refuse"})
    assert caught.value.reason == "UNKNOWN_DETECTOR" and len(caught.value.message) < 300


def test_the_cli_sets_no_empty_policy_and_resets_by_name(server, new_tenant):
    _, key = new_tenant()
    env = {**os.environ, "MEMPLANE_API_KEY": key}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "memplane_server.cli", "admin", "content-policy", *args,
                               "--target", server.target], env=env, capture_output=True, text=True, timeout=60)

    assert cli("set", "--rule", "email=refuse").returncode == 0
    refused = cli("set")
    assert refused.returncode == 2 and "content-policy reset" in refused.stderr
    reset = cli("reset")
    assert reset.returncode == 0, reset.stderr
    assert json.loads(reset.stdout)["rules"] == {} and json.loads(cli("get").stdout)["effective"]["email"] == "tag"
