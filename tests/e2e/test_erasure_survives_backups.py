"""An erasure no backup or export can undo: a backup and an export taken, then a user erased, then
the backup restored into a fresh data directory (with the keys folder as it is now) and the export
imported. None of that user's memories come back; every other memory comes back whole; the restore
and the import say how many memories they left out as erased. A restore made without the keys
folder serves nothing, also once the folder is copied back, until `memplane keys sweep` is run."""
from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from memplane import MemoryClient
from tests.e2e.conftest import ServerProcess, embedded_env, free_port
from tests.e2e.test_backup import memplane, tmp_dirs  # noqa: F401 (a fixture)

ANN = ["Ann prefers aisle seats on long flights", "Ann's badge number is 40417"]
BOB = ["Bob's home address is 12 Quay Street", "Bob takes the 7:40 train", "Bob is allergic to penicillin"]
NOBODY = ["The payments service deploys every Thursday"]


@pytest.mark.slow
def test_a_user_erased_after_a_backup_and_an_export_does_not_come_back_from_either(services_urls, tmp_dirs,  # noqa: F811
                                                                                   monkeypatch):
    monkeypatch.delenv("MEMPLANE_DATABASE_URL", raising=False)
    redis = services_urls[1].rsplit("/", 1)[0] + "/4"
    first_dir, second_dir = tmp_dirs("memplane-shred-a-"), tmp_dirs("memplane-shred-b-")
    export_file = first_dir / "default.jsonl"
    first = ServerProcess(embedded_env(first_dir, redis)).start()
    try:
        tenant_key = first.key("tenant admin")
        with MemoryClient(first.target, tenant_key) as client:
            client.write([{"content": t, "kind": "fact", "user_id": "ann"} for t in ANN]
                         + [{"content": t, "kind": "fact", "user_id": "bob"} for t in BOB]
                         + [{"content": t, "kind": "fact"} for t in NOBODY])
            exported = memplane({"MEMPLANE_DATA_DIR": str(first_dir)}, "export", "--tenant", "default",
                                "--out", str(export_file))
            assert exported.returncode == 0, exported.stderr
            made = memplane({"MEMPLANE_DATA_DIR": str(first_dir)}, "backup")
            assert made.returncode == 0, made.stderr
            receipt = client.erase_user("bob", mode="sync").receipt
        assert receipt.counts["postgres.memories"] == len(BOB) and receipt.counts["user_keys.destroyed"] == 1
    finally:
        first.stop()
    archive = Path(made.stdout.strip())
    assert all(t not in export_file.read_text() for t in ANN + BOB), "memories about users stay sealed in an export"

    # The keys folder moves as it is now (the KEK and the users' keys left after the erasure).
    shutil.copytree(first_dir / "keys", second_dir / "keys")
    restored = memplane({"MEMPLANE_DATA_DIR": str(second_dir)}, "restore", str(archive))
    assert restored.returncode == 0, restored.stderr
    assert f"{len(BOB)} memories of 1 erased users could not be decrypted" in restored.stdout
    imported = memplane({"MEMPLANE_DATA_DIR": str(second_dir)}, "import", str(export_file), "--tenant", "default-copy")
    assert imported.returncode == 0, imported.stderr
    assert f"{len(ANN) + len(NOBODY)} memories" in imported.stdout
    assert f"left out as erased: {len(BOB)} memories" in imported.stderr

    second = ServerProcess(embedded_env(second_dir, redis)).start()
    try:
        with MemoryClient(second.target, tenant_key) as client:
            back = {m.content: m.user_id for m in client.iter_memories(page_size=100)}
            assert back == {**{t: "ann" for t in ANN}, **{t: "" for t in NOBODY}}
            assert not [h for h in client.search("Bob's home address, train and allergy", top_k=10).hits
                        if h.memory.user_id == "bob"]
    finally:
        assert second.stop(signal.SIGTERM) == 0


@pytest.mark.slow
def test_a_restore_without_the_keys_folder_serves_nothing_until_its_sweep_is_done(services_urls, tmp_dirs,  # noqa: F811
                                                                                 monkeypatch):
    monkeypatch.delenv("MEMPLANE_DATABASE_URL", raising=False)
    redis = services_urls[1].rsplit("/", 1)[0] + "/8"
    first_dir, second_dir = tmp_dirs("memplane-unswept-a-"), tmp_dirs("memplane-unswept-b-")
    first = ServerProcess(embedded_env(first_dir, redis)).start()
    try:
        tenant_key = first.key("tenant admin")
        with MemoryClient(first.target, tenant_key) as client:
            client.write([{"content": t, "kind": "fact", "user_id": "ann"} for t in ANN]
                         + [{"content": t, "kind": "fact", "user_id": "bob"} for t in BOB])
            made = memplane({"MEMPLANE_DATA_DIR": str(first_dir)}, "backup")
            assert made.returncode == 0, made.stderr
            client.erase_user("bob", mode="sync")
    finally:
        first.stop()

    # Restored without the keys folder: the sweep cannot tell erased users from the others.
    restored = memplane({"MEMPLANE_DATA_DIR": str(second_dir)}, "restore", made.stdout.strip())
    assert restored.returncode == 1 and "then run `memplane keys sweep`" in restored.stderr, restored.stderr
    shutil.copytree(first_dir / "keys", second_dir / "keys", dirs_exist_ok=True)
    server_env = embedded_env(second_dir, redis)

    refused = memplane({**server_env, "MEMPLANE_LISTEN": f"127.0.0.1:{free_port()}"}, "serve", timeout=180)

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "run `memplane keys sweep`, then start servers and workers" in refused.stderr
    assert "Traceback" not in refused.stderr and "memplane listening" not in refused.stdout

    swept = memplane({"MEMPLANE_DATA_DIR": str(second_dir)}, "keys", "sweep")
    assert swept.returncode == 0, swept.stderr
    assert json.loads(swept.stdout)["swept"]["memories"] == len(BOB)
    second = ServerProcess(server_env).start()
    try:
        with MemoryClient(second.target, tenant_key) as client:
            back = [(m.content, m.user_id) for m in client.iter_memories(page_size=100)]
            assert sorted(back) == sorted((t, "ann") for t in ANN)
    finally:
        assert second.stop(signal.SIGTERM) == 0
