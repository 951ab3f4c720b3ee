"""Lifecycle policies through the SDK and the CLI against a `memplane serve` process: set, get and a
dry run, the sync and async admin clients alike; bad values are INVALID_ARGUMENT with the reason and
field; a tenant admin key reaches only its own tenant."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from memplane import AdminClient, AsyncAdminClient, LifecycleKindRule, MemoryClient
from memplane.errors import InvalidArgumentError, PermissionDeniedError


def test_set_get_and_dry_run_through_the_sdk(server, new_tenant):
    tenant, key = new_tenant()
    with MemoryClient(server.target, key) as client:
        [turn] = client.write([{"content": "a passing remark about the weather", "kind": "turn"}]).memories
    with AdminClient(server.target, key) as admin:
        defaults = admin.get_lifecycle_policy()
        assert not defaults.is_set and not defaults.enabled and len(defaults.rules) == 7
        wanted = replace(defaults, enabled=True, rules=(LifecycleKindRule("turn", ttl_days=0.0, unused_days=0.0,
                                                                           value_half_life_days=0.0),))
        stored = admin.set_lifecycle_policy(wanted)
        assert stored.is_set and stored.enabled and stored.tenant_id == tenant
        assert stored.rule("turn").ttl_days == 0 and stored.rule("fact") == defaults.rule("fact")
        assert admin.get_lifecycle_policy(tenant) == stored
        report = admin.run_lifecycle(dry_run=True)
    assert report.dry_run and report.tenant_id == tenant and report.examined == 1
    assert set(report.counts) == {"ttl", "unused", "value", "archive", "review", "unflag", "demote", "restore"}
    with MemoryClient(server.target, key) as client:
        assert client.get_memory(turn.id).status.name == "ACTIVE"


def test_the_async_client_has_the_same_calls(server, new_tenant):
    tenant, key = new_tenant()

    async def go():
        async with AsyncAdminClient(server.target, key) as admin:
            stored = await admin.set_lifecycle_policy(replace(await admin.get_lifecycle_policy(), hard_delete=True))
            report = await admin.run_lifecycle(tenant, dry_run=True)
            return stored, report

    stored, report = asyncio.run(go())
    assert stored.hard_delete and report.dry_run and report.examined == 0


def test_bad_values_and_other_tenants_are_refused(server, new_tenant):
    (_, key_a), (b, _) = new_tenant(), new_tenant()
    with AdminClient(server.target, key_a) as admin:
        policy = admin.get_lifecycle_policy()
        with pytest.raises(InvalidArgumentError) as caught:
            admin.set_lifecycle_policy(replace(policy, rules=(LifecycleKindRule("fact", demote_after_days=30,
                                                                                demote_weight=1.5),)))
        assert caught.value.reason == "INVALID_LIFECYCLE_POLICY" and "demote_weight" in caught.value.message
        with pytest.raises(InvalidArgumentError):
            admin.set_lifecycle_policy(replace(policy, rules=(LifecycleKindRule("unspecified"),)))
        with pytest.raises(PermissionDeniedError):
            admin.set_lifecycle_policy(replace(policy, tenant_id=b))
        with pytest.raises(PermissionDeniedError):
            admin.run_lifecycle(b, dry_run=True)


def test_the_cli_sets_one_rule_and_reports_a_dry_run(server, new_tenant):
    tenant, key = new_tenant()
    env = {**os.environ, "MEMPLANE_API_KEY": key}

    def cli(*args: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "memplane_server.cli", "admin", "lifecycle", *args,
                              "--target", server.target], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    stored = cli("set", "--enable", "--rule", "turn.ttl_days=45", "--archive-tasks-after-days", "7")
    assert stored["enabled"] and stored["archive_tasks_after_days"] == 7
    assert next(r for r in stored["rules"] if r["kind"] == "turn")["ttl_days"] == 45
    assert cli("get")["is_set"] is True
    report = cli("run", "--dry-run")
    assert report["dry_run"] is True and report["tenant_id"] == tenant
