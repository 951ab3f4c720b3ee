"""Crypto-shredding: memories about a user are sealed under that user's key, kept outside the
database; erasing the user destroys it, so rows copied before the erasure (a backup, an export)
no longer open; writes racing an erasure never seal under a destroyed key; a memory given to
another user moves to that user's key; rows about users under the tenant's key move to the users'
keys; a KEK rotation re-wraps users' keys; a server given another key folder refuses to start;
`memplane keys sweep` removes what destroyed keys sealed."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest

from memplane_server.core.access.caller import Caller, Role
from memplane_server.core.forget.erasure import subject_of
from memplane_server.core.model import Kind, MemoryDraft, Scope
from memplane_server.runtime import Runtime
from memplane_server.services.content.keys import TenantKeys
from memplane_server.services.memories import MemoriesService
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.content.keys import TenantKeyStore
from memplane_server.stores.sealing import OPENERS, Kek, Shredded, Texts, is_user_key_ref, open_sealed_texts, open_texts
from memplane_server.stores.user_keys import UserKeyFiles
from tests.conftest import make_shared_tmpdir
from tests.support.keys import ENCRYPTION_KEYS, register_keys
from tests.support.services import erasure_service

pytestmark = pytest.mark.asyncio(loop_scope="session")


def unique(label: str) -> str:
    return f"{label} {uuid.uuid4().hex[:12]}"


def draft(content: str, user_id: str | None = None, **fields) -> MemoryDraft:
    return MemoryDraft(scope=fields.pop("scope", Scope.GLOBAL), domain=None, agent_id=None, layer=None,
                       kind=fields.pop("kind", Kind.FACT), content=content, user_id=user_id, **fields)


async def admin_of(deps, world) -> Caller:
    admin = Caller(key_id=f"{world.tenant_id}-admin", role=Role.TENANT_ADMIN, tenant_id=world.tenant_id, agent_id=None)
    await register_keys(deps.tenancy.pool, admin)
    return admin


async def stored_row(deps, memory_id):
    return await deps.memories.pool.fetchrow(
        "SELECT tenant_id, sealed_key, content, context, value, metadata FROM memories WHERE id = $1", memory_id)


def opens(row) -> Texts:
    return open_sealed_texts(row["sealed_key"], row["tenant_id"],
                             Texts(row["content"], row["context"], row["value"], row["metadata"]))


async def test_a_memory_about_a_user_is_sealed_under_that_users_key_and_others_under_the_tenants(deps, make_tenant):
    world = await make_tenant()
    about_ann, about_nobody = unique("ann likes tea"), unique("the office opens at nine")
    [ann, nobody] = await WriteService(deps).write(world.writer, [draft(about_ann, "ann"), draft(about_nobody)])

    ann_row, nobody_row = await stored_row(deps, ann.id), await stored_row(deps, nobody.id)
    assert is_user_key_ref(ann_row["sealed_key"]) and not is_user_key_ref(nobody_row["sealed_key"])
    assert ann_row["sealed_key"][1:33].hex() == subject_of(world.tenant_id, "ann")
    assert (deps.keys.users.folder / subject_of(world.tenant_id, "ann")[:2] / subject_of(world.tenant_id, "ann")).exists()
    assert opens(ann_row).content == about_ann and opens(nobody_row).content == about_nobody


async def test_erasing_a_user_destroys_the_key_so_a_copy_taken_before_no_longer_opens(deps, make_tenant):
    world = await make_tenant()
    admin = await admin_of(deps, world)
    text = unique("bo's card ends 4242")
    [bo] = await WriteService(deps).write(world.writer, [draft(text, "bo", context=unique("from chat"))])
    [kept] = await WriteService(deps).write(world.writer, [draft(unique("cy's note"), "cy")])
    copy = await stored_row(deps, bo.id)  # as a backup taken now holds it

    done = await erasure_service(deps).erase(admin, "bo", mode="sync", reason="gdpr")

    assert done.receipt.counts["user_keys.destroyed"] == 1
    with pytest.raises(Shredded):
        opens(copy)
    assert open_texts(copy["sealed_key"], copy["tenant_id"], Texts(copy["content"], copy["context"], None, {})) == \
        Texts("", "", None, {})  # read back anywhere, it reads as erased, never as an error
    assert opens(await stored_row(deps, kept.id)).content == kept.content
    [again] = await WriteService(deps).write(world.writer, [draft(unique("bo came back"), "bo")])
    again_row = await stored_row(deps, again.id)
    assert again_row["sealed_key"] != copy["sealed_key"] and opens(again_row).content == again.content


async def test_a_dry_run_counts_the_key_and_destroys_nothing(deps, make_tenant):
    world = await make_tenant()
    admin = await admin_of(deps, world)
    [dee] = await WriteService(deps).write(world.writer, [draft(unique("dee"), "dee")])

    done = await erasure_service(deps).erase(admin, "dee", dry_run=True)

    assert done.receipt.counts["user_keys.destroyed"] == 1
    assert opens(await stored_row(deps, dee.id)).content == dee.content


async def test_an_agents_erasure_keeps_the_key_while_other_agents_memories_of_the_user_remain(deps, make_tenant):
    world = await make_tenant()
    [mine] = await WriteService(deps).write(world.agent1, [draft(unique("eve by a1"), "eve", scope=Scope.PRIVATE)])
    [theirs] = await WriteService(deps).write(world.agent2, [draft(unique("eve by a2"), "eve", scope=Scope.PRIVATE)])

    done = await erasure_service(deps).erase(world.agent1, "eve", mode="sync")

    assert done.receipt.counts["postgres.memories"] == 1 and done.receipt.counts["user_keys.destroyed"] == 0
    assert opens(await stored_row(deps, theirs.id)).content == theirs.content
    assert await stored_row(deps, mine.id) is None


async def test_writes_racing_an_erasure_never_leave_a_memory_sealed_under_a_destroyed_key(deps, make_tenant):
    world = await make_tenant()
    admin = await admin_of(deps, world)
    writes = WriteService(deps)
    await writes.write(world.writer, [draft(unique("fay before"), "fay")])

    async def write_some() -> None:
        for i in range(15):
            await writes.write(world.writer, [draft(unique(f"fay {i}"), "fay")])

    async def erase_now_and_then() -> None:
        for _ in range(6):
            await erasure_service(deps).erase(admin, "fay", mode="sync")
            await asyncio.sleep(0.01)

    await asyncio.gather(*(write_some() for _ in range(4)), erase_now_and_then())

    rows = await deps.memories.pool.fetch(
        "SELECT tenant_id, sealed_key, content, context, value, metadata FROM memories"
        " WHERE tenant_id = $1 AND user_id = 'fay'", world.tenant_id)
    for row in rows:
        opens(row)  # raises Shredded for a row sealed under the destroyed key


async def test_a_memory_given_to_another_user_moves_to_that_users_key(deps, make_tenant):
    world = await make_tenant()
    admin = await admin_of(deps, world)
    text = unique("gus or hal booked the trip")
    [memory] = await WriteService(deps).write(world.writer, [draft(text, "gus", metadata={"seat": "12A"})])

    await MemoriesService(deps).update(world.writer, str(memory.id), {"user_id": "hal"})
    await erasure_service(deps).erase(admin, "gus", mode="sync")

    row = await stored_row(deps, memory.id)
    assert row["sealed_key"][1:33].hex() == subject_of(world.tenant_id, "hal")
    assert (opens(row).content, opens(row).metadata) == (text, {"seat": "12A"})
    got = await MemoriesService(deps).get(world.writer, str(memory.id))
    assert (got.content, got.user_id) == (text, "hal")


async def test_the_upkeep_moves_memories_about_users_from_the_tenants_key_to_the_users(deps, make_tenant):
    world = await make_tenant()
    without_users = TenantKeys(TenantKeyStore(deps.memories.pool), deps.keys.active_kek, 0.5)
    text = unique("ivy wrote this before users' keys were kept")
    [old] = await WriteService(deps).write(world.writer, [draft(text, "ivy")])
    await deps.memories.pool.execute(  # as a deployment before users' keys sealed it
        "UPDATE memories SET sealed_key = $2, content = $3 WHERE id = $1", old.id,
        await without_users.current(world.tenant_id),
        OPENERS.seal_text(await without_users.current(world.tenant_id), world.tenant_id, "content", text))

    await deps.keys.upkeep(first_round=True)

    row = await stored_row(deps, old.id)
    assert row["sealed_key"][1:33].hex() == subject_of(world.tenant_id, "ivy") and opens(row).content == text


async def test_a_kek_rotation_rewraps_the_users_keys(deps, make_tenant, settings):
    world = await make_tenant()
    [jo] = await WriteService(deps).write(world.writer, [draft(unique("jo"), "jo")])
    folder = make_shared_tmpdir("memplane-user-keys-rewrap-")
    files = UserKeyFiles(folder, OPENERS, deps.keys.active_kek)
    ref = files.current(world.tenant_id, "jo")
    OPENERS.add([Kek("rewrap-2", b"\x07" * 32)])
    files.active_kek = "rewrap-2"

    assert files.rewrap() == 1 and files.kek_ids() == {"rewrap-2": 1}
    assert files.read(ref) is not None and files.rewrap() == 0
    assert opens(await stored_row(deps, jo.id)).content == jo.content


@pytest.mark.parametrize("folder, reason", [("other", "holds folder"), (None, "has no MEMPLANE_USER_KEYS_DIR")])
async def test_a_server_given_another_key_folder_or_none_refuses_to_start(deps, settings, folder, reason):
    changed = settings.model_copy(
        update={"user_keys_dir": make_shared_tmpdir("memplane-user-keys-other-") if folder else None})
    other = Runtime(changed, changed.database_url, changed.redis_url)
    try:
        with pytest.raises(SystemExit, match=reason):
            await other.open()
    finally:
        await other.close()
    assert OPENERS.user_keys is deps.keys.users  # the refused one never took this process's folder


async def test_the_sweep_removes_as_erased_what_a_destroyed_key_sealed_and_reports_it(settings, deps, make_tenant):
    world = await make_tenant()
    [kim] = await WriteService(deps).write(world.writer, [draft(unique("kim's locker code"), "kim")])
    [kept] = await WriteService(deps).write(world.writer, [draft(unique("lee's desk"), "lee")])
    deps.keys.users.destroy(world.tenant_id, "kim")  # as a database restored from before kim's erasure holds it
    env = {**os.environ, "MEMPLANE_DATABASE_URL": settings.database_url, "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
           "MEMPLANE_USER_KEYS_DIR": str(settings.user_keys_dir),
           # As the suite's server is configured: through PgBouncer when the run puts it there.
           "MEMPLANE_DATABASE_POOLED": str(settings.database_pooled).lower(),
           "MEMPLANE_MIGRATION_DATABASE_URL": settings.migration_database_url or ""}

    swept = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "memplane_server.cli", "keys", "sweep"], env=env,
        capture_output=True, text=True, timeout=120)

    assert swept.returncode == 0, swept.stderr
    assert json.loads(swept.stdout)["swept"]["memories"] == 1
    assert "1 memories of 1 erased users could not be decrypted" in json.loads(swept.stdout)["report"]
    assert await stored_row(deps, kim.id) is None and opens(await stored_row(deps, kept.id)).content == kept.content
