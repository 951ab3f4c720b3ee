"""The content policy on the real write path (PostgreSQL, Redis): by default a secret is redacted
before it is embedded or stored and personal data is tagged; a tenant admin turns detectors to
refuse, redact, tag or off; a domain is stricter than its tenants by default and only a platform
admin sets its policy; a refused batch leaves nothing; admins of one tenant cannot read, set or
scan another's policy; the dry-run scan reports without changing anything."""
from __future__ import annotations

import json
import uuid

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.content.policy import Action
from memplane_server.core.errors import Code, MemplaneError
from memplane_server.core.model import Kind, Layer, MemoryDraft, MemoryFilter, Scope
from memplane_server.core.reflection.reflection import ReflectInput, Task, TaskStep
from memplane_server.services.content.admin import ContentPolicyService
from memplane_server.services.memories import MemoriesService
from memplane_server.services.reflection.reflect import opened_task
from memplane_server.services.search.service import SearchQuery, SearchService
from memplane_server.services.working import WorkingService
from memplane_server.services.write.service import WriteService
from tests.integration.conftest import PLATFORM
from tests.support.clear_text import database_text, redis_text
from tests.support.services import reflect_service

pytestmark = pytest.mark.asyncio(loop_scope="session")

# AWS's documented example key: a real format, never a real credential.
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
EMAIL = "li.wei@example.cn"


def admin_of(tenant: str, domains: dict[str, bool] | None = None) -> Caller:
    return Caller(key_id=f"{tenant}-admin", role=Role.TENANT_ADMIN, tenant_id=tenant, agent_id=None,
                  domains=domains or {})


def draft(content: str, **fields) -> MemoryDraft:
    fields.setdefault("scope", Scope.GLOBAL)
    return MemoryDraft(domain=fields.pop("domain", None), agent_id=None, layer=fields.pop("layer", None),
                       kind=fields.pop("kind", Kind.FACT), content=content, **fields)


async def stored_rows(deps, tenant: str) -> str:
    """The tenant's memories and their history, as text."""
    pool = deps.memories.pool
    return "\n".join(r[0] for r in await pool.fetch(
        "SELECT (to_jsonb(m) - 'embedding' - 'context_embedding')::text FROM memories m WHERE tenant_id = $1"
        " UNION ALL SELECT to_jsonb(h)::text FROM memory_history h WHERE tenant_id = $1", tenant))


async def nowhere(deps, text: str) -> bool:
    """Whether no table of PostgreSQL and no key of Redis holds the text."""
    return text not in await database_text(deps.memories.pool) and text not in await redis_text(deps.working.client)


async def test_a_secret_is_redacted_by_default_before_it_is_stored(deps, make_tenant):
    world = await make_tenant()
    [record] = await WriteService(deps).write(world.writer, [draft(f"the deploy key is {AWS_KEY}, keep it safe")])

    assert record.content == "the deploy key is [REDACTED:aws_access_key], keep it safe"
    assert await nowhere(deps, AWS_KEY)


async def test_personal_data_is_tagged_by_default_and_the_tag_filters_and_explains(deps, make_tenant):
    world = await make_tenant()
    [tagged, plain] = await WriteService(deps).write(
        world.writer, [draft(f"Li Wei's e-mail is {EMAIL}"), draft("Li Wei prefers tea to coffee")])

    assert tagged.content == f"Li Wei's e-mail is {EMAIL}"
    assert "content:email" in tagged.tags and "content:email" not in plain.tags
    hits = await SearchService(deps).search(
        world.writer, SearchQuery(text="Li Wei", top_k=5, explain=True, filter=MemoryFilter(tags=("content:email",))))
    assert [h.memory.id for h in hits] == [tagged.id]
    assert any(c.name == "content_policy" and "email" in c.detail for c in hits[0].explanation)


async def test_a_refused_item_fails_the_batch_naming_detector_and_field_but_never_the_match(deps, make_tenant):
    world = await make_tenant()
    await ContentPolicyService(deps).set(admin_of(world.tenant_id), "", "", {"secret": "refuse"})

    with pytest.raises(MemplaneError) as caught:
        await WriteService(deps).write(world.writer, [
            draft("an innocent note"),
            draft("meeting notes", metadata={"pasted": {"creds": f"aws {AWS_KEY}"}}),
        ])

    err = caught.value
    assert (err.code, err.reason) == (Code.INVALID_ARGUMENT, "CONTENT_POLICY")
    assert err.metadata == {"detector": "aws_access_key", "field": "metadata.pasted.creds", "index": "1"}
    assert AWS_KEY not in err.message and AWS_KEY not in json.dumps(err.metadata)
    assert await stored_rows(deps, world.tenant_id) == ""


async def test_context_value_and_metadata_are_screened_like_content(deps, make_tenant):
    world = await make_tenant()
    await ContentPolicyService(deps).set(admin_of(world.tenant_id), "", "", {"personal": "redact"})

    [record] = await WriteService(deps).write(world.writer, [draft(
        "Li Wei's contact", context=f"when mailing {EMAIL}", entity="li-wei", attribute="email", value=EMAIL,
        metadata={"source": {"from": EMAIL}, EMAIL: 1})])

    assert record.context == "when mailing [REDACTED:email]" and record.value == "[REDACTED:email]"
    assert record.metadata == {"source": {"from": "[REDACTED:email]"}, "[REDACTED:email]": 1}
    assert EMAIL not in await stored_rows(deps, world.tenant_id)


async def test_working_memory_is_screened_before_it_reaches_redis(deps, make_tenant):
    world = await make_tenant()
    session = f"s-{uuid.uuid4().hex[:8]}"
    [item] = await WriteService(deps).write(world.agent1, [draft(
        f"user pasted {AWS_KEY}", scope=Scope.PRIVATE, layer=Layer.WORKING, kind=Kind.TURN, session_id=session)])

    assert item.content == "user pasted [REDACTED:aws_access_key]"
    assert AWS_KEY not in await redis_text(deps.working.client)


async def test_what_the_server_derives_is_redacted_where_a_callers_write_would_be_refused(deps, make_tenant):
    world = await make_tenant()
    session = f"s-{uuid.uuid4().hex[:8]}"
    await WriteService(deps).write(world.agent1, [draft(
        f"reach me at {EMAIL}", scope=Scope.PRIVATE, layer=Layer.WORKING, kind=Kind.TURN, session_id=session)])
    # The policy tightens while the session is open: closing it must not fail on what it holds.
    await ContentPolicyService(deps).set(admin_of(world.tenant_id), "", "", {"email": "refuse"})

    [promoted] = await WorkingService(deps, WriteService(deps)).close(world.agent1, session, promote=True)

    assert promoted.content == "reach me at [REDACTED:email]"
    with pytest.raises(MemplaneError):
        await WriteService(deps).write(world.agent1, [draft(f"reach me at {EMAIL}", scope=Scope.PRIVATE)])


async def test_an_update_is_screened_and_a_tag_joins_the_memorys_tags(deps, make_tenant):
    world = await make_tenant()
    [record] = await WriteService(deps).write(world.writer, [draft("Li Wei's contact details", tags=("people",))])

    updated = await MemoriesService(deps).update(
        world.writer, str(record.id), {"content": f"Li Wei: {EMAIL}, key {AWS_KEY}"})

    assert updated.content == f"Li Wei: {EMAIL}, key [REDACTED:aws_access_key]"
    assert set(updated.tags) == {"people", "content:email"}
    assert AWS_KEY not in await stored_rows(deps, world.tenant_id)


async def test_a_domain_redacts_personal_data_its_tenant_only_tags(deps, make_tenant):
    domain = f"d-{uuid.uuid4().hex[:8]}"
    world = await make_tenant({domain: True})
    [private, shared] = await WriteService(deps).write(world.writer, [
        draft(f"mail {EMAIL}"), draft(f"mail {EMAIL}", scope=Scope.DOMAIN, domain=domain)])

    assert private.content == f"mail {EMAIL}"
    assert shared.content == "mail [REDACTED:email]"


async def test_a_domain_policy_is_the_platforms_and_applies_on_top_of_the_tenants(deps, make_tenant):
    domain = f"d-{uuid.uuid4().hex[:8]}"
    world = await make_tenant({domain: True})
    policies = ContentPolicyService(deps)
    with pytest.raises(MemplaneError) as caught:
        await policies.set(admin_of(world.tenant_id), "", domain, {"email": "off"})
    assert caught.value.reason == "PLATFORM_ADMIN_REQUIRED"

    await policies.set(PLATFORM, "", domain, {"email": "refuse"})
    await policies.set(admin_of(world.tenant_id), "", "", {"email": "off"})

    [outside] = await WriteService(deps).write(world.writer, [draft(f"mail {EMAIL}")])
    assert outside.content == f"mail {EMAIL}" and "content:email" not in outside.tags
    with pytest.raises(MemplaneError) as refused:
        await WriteService(deps).write(world.writer, [draft(f"mail {EMAIL}", scope=Scope.DOMAIN, domain=domain)])
    assert refused.value.reason == "CONTENT_POLICY"
    view = await policies.get(admin_of(world.tenant_id, {domain: True}), "", domain)  # a member's admin may read it
    assert view.effective["email"] is Action.REFUSE and view.is_set
    with pytest.raises(MemplaneError) as outsider:
        await policies.get(admin_of((await make_tenant()).tenant_id), "", domain)
    assert outsider.value.code is Code.PERMISSION_DENIED


async def test_one_tenants_admin_can_neither_read_set_nor_scan_anothers_policy(deps, make_tenant):
    a, b = await make_tenant(), await make_tenant()
    policies = ContentPolicyService(deps)
    await policies.set(admin_of(b.tenant_id), "", "", {"email": "refuse"})

    for call in (policies.get(admin_of(a.tenant_id), b.tenant_id, ""),
                 policies.set(admin_of(a.tenant_id), b.tenant_id, "", {"email": "off"}),
                 policies.scan(admin_of(a.tenant_id), b.tenant_id, "", None)):
        with pytest.raises(MemplaneError) as caught:
            await call
        assert caught.value.code is Code.PERMISSION_DENIED
    # B's refusal is B's: A's writes keep the defaults.
    [mine] = await WriteService(deps).write(a.writer, [draft(f"mail {EMAIL}")])
    assert "content:email" in mine.tags
    assert (await policies.get(admin_of(b.tenant_id), "", "")).effective["email"] is Action.REFUSE


async def test_row_level_security_keeps_policy_rows_apart(deps, make_tenant):
    a, b = await make_tenant(), await make_tenant()
    policies = ContentPolicyService(deps)
    await policies.set(admin_of(a.tenant_id), "", "", {"phone": "refuse"})

    assert await deps.content.store.tenant_rules(b.tenant_id) is None
    assert (await deps.content.store.tenant_rules(a.tenant_id)).rules == {"phone": "refuse"}


async def test_unknown_detectors_and_actions_are_refused_with_the_reason(deps, make_tenant):
    world = await make_tenant()
    policies = ContentPolicyService(deps)
    for rules, reason in (({"passport": "redact"}, "UNKNOWN_DETECTOR"), ({"email": "shred"}, "INVALID_CONTENT_ACTION")):
        with pytest.raises(MemplaneError) as caught:
            await policies.set(admin_of(world.tenant_id), "", "", rules)
        assert (caught.value.code, caught.value.reason) == (Code.INVALID_ARGUMENT, reason)


async def test_a_dry_run_scan_reports_what_a_policy_would_change_and_changes_nothing(deps, make_tenant):
    world = await make_tenant()
    written = await WriteService(deps).write(world.writer, [
        draft(f"mail {EMAIL}"), draft("nothing to see"), draft("call +1 415 555 0132 tomorrow")])
    before = await stored_rows(deps, world.tenant_id)

    report = await ContentPolicyService(deps).scan(admin_of(world.tenant_id), "", "", {"email": "refuse", "phone": "redact"})

    assert report.examined == 3
    assert report.ids[Action.REFUSE] == [str(written[0].id)]
    assert report.ids[Action.REDACT] == [str(written[2].id)]
    assert report.counts[("email", Action.REFUSE)] == 1
    assert await stored_rows(deps, world.tenant_id) == before


async def test_a_task_trajectory_to_reflect_on_is_screened_before_it_is_queued(deps, make_tenant):
    world = await make_tenant()
    task = Task(task_id=f"t-{uuid.uuid4().hex[:8]}", request="rotate the deploy credentials",
                steps=(TaskStep(action="read the vault", observation=f"found {AWS_KEY}"),), outcome="success")

    operation = await reflect_service(deps).reflect(world.writer, ReflectInput(task=task, mode="async"))
    stored = await deps.memories.pool.fetchval("SELECT payload FROM jobs WHERE id = $1", operation.id)
    payload = json.dumps(opened_task(stored, world.tenant_id))  # sealed as memories are
    await ContentPolicyService(deps).set(admin_of(world.tenant_id), "", "", {"secret": "refuse"})
    with pytest.raises(MemplaneError) as caught:
        await reflect_service(deps).reflect(world.writer, ReflectInput(task=task, mode="async"))

    assert AWS_KEY not in payload and "[REDACTED:aws_access_key]" in payload
    assert (caught.value.reason, caught.value.metadata["field"]) == ("CONTENT_POLICY", "task.steps[0].observation")
