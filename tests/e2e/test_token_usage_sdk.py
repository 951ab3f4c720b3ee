"""Token usage and budgets through the SDK and the CLI against a `memplane serve` process: a
platform admin sets a tenant's daily budget and resets it to the server's default; the tenant's
admin reads its usage and budget as typed results, but neither sets a budget nor reads another
tenant's usage; a set without a value is refused."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone

import grpc
import pytest

from memplane import AdminClient, AsyncAdminClient, TokenUsage
from memplane.errors import InvalidArgumentError, PermissionDeniedError, from_rpc_error
from memplane.v1 import admin_service_pb2 as a
from memplane.v1 import admin_service_pb2_grpc as a_grpc


def test_a_platform_admin_sets_the_budget_that_the_tenant_admin_reads(server, new_tenant, platform_key):
    tenant, key = new_tenant()
    with AdminClient(server.target, platform_key) as platform:
        stored = platform.set_token_budget(tenant, 50_000)
    assert (stored.tenant_id, stored.tokens_per_day, stored.is_set) == (tenant, 50_000, True) and stored.updated_by
    with AdminClient(server.target, key) as admin:
        usage = admin.get_token_usage(start_day=datetime.now(timezone.utc).date() - timedelta(days=6))
    assert isinstance(usage, TokenUsage) and usage.tenant_id == tenant
    assert (usage.budget.tokens_per_day, usage.spent_today, usage.counts) == (50_000, 0, ())
    assert (usage.end_day - usage.start_day).days == 6


def test_a_reset_gives_the_tenant_the_servers_default_again(server, new_tenant, platform_key):
    tenant, _ = new_tenant()

    async def go():
        async with AsyncAdminClient(server.target, platform_key) as platform:
            await platform.set_token_budget(tenant, 10)
            return await platform.reset_token_budget(tenant), await platform.get_token_usage(tenant)

    reset, usage = asyncio.run(go())
    assert (reset.tokens_per_day, reset.is_set) == (0, False) and usage.budget == reset


def test_a_tenant_admin_neither_sets_its_budget_nor_reads_another_tenants_usage(server, new_tenant):
    tenant, key = new_tenant()
    other, _ = new_tenant()
    with AdminClient(server.target, key) as admin:
        with pytest.raises(PermissionDeniedError):
            admin.set_token_budget(tenant, 0)
        with pytest.raises(PermissionDeniedError):
            admin.get_token_usage(other)


def test_a_budget_without_a_value_is_refused(server, new_tenant, platform_key):
    tenant, _ = new_tenant()
    with grpc.insecure_channel(server.target) as channel, pytest.raises(grpc.RpcError) as raw:
        a_grpc.AdminServiceStub(channel).SetTokenBudget(
            a.SetTokenBudgetRequest(tenant_id=tenant), metadata=[("authorization", f"Bearer {platform_key}")])
    assert from_rpc_error(raw.value).reason == "TOKEN_BUDGET_REQUIRED"
    with AdminClient(server.target, platform_key) as platform, pytest.raises(InvalidArgumentError):
        platform.get_token_usage(tenant, start_day=date(2026, 3, 2), end_day=date(2026, 3, 1))


def test_the_cli_sets_a_budget_and_prints_the_usage(server, new_tenant, platform_key):
    tenant, key = new_tenant()

    def cli(key: str, *args: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "memplane_server.cli", "admin", *args, "--target", server.target],
                             env={**os.environ, "MEMPLANE_API_KEY": key}, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    assert cli(platform_key, "token-budget", "set", "--tenant", tenant, "--tokens-per-day", "7")["tokens_per_day"] == 7
    usage = cli(key, "token-usage", "--start-day", "2026-01-01", "--end-day", "2026-01-31")
    assert (usage["start_day"], usage["budget"]["tokens_per_day"], usage["counts"]) == ("2026-01-01", 7, [])
