"""An erasure no backup or export can undo: a backup and an export taken, then a user erased, then
the backup restored into a fresh data directory (with the keys folder as it is now) and the export
imported. None of that user's memories come back; every other memory comes back whole; the restore
and the import say how many memories they left out as erased."""
from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from memplane import MemoryClient
from tests.e2e.conftest import ServerProcess
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
    first = ServerProcess({"MEMPLANE_DATA_DIR": str(first_dir), "MEMPLANE_REDIS_URL": redis,
                           "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2"}).start()
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

    second = ServerProcess({"MEMPLANE_DATA_DIR": str(second_dir), "MEMPLANE_REDIS_URL": redis,
                            "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2"}).start()
    try:
        with MemoryClient(second.target, tenant_key) as client:
            back = {m.content: m.user_id for m in client.iter_memories(page_size=100)}
            assert back == {**{t: "ann" for t in ANN}, **{t: "" for t in NOBODY}}
            assert not [h for h in client.search("Bob's home address, train and allergy", top_k=10).hits
                        if h.memory.user_id == "bob"]
    finally:
        assert second.stop(signal.SIGTERM) == 0
