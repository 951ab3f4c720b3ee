"""`memplane import-chats` against a real server: a ChatGPT export of 1,000 messages imported
twice stores 1,000 turns once; an import killed halfway and run again stores the rest; a dry run
counts and writes nothing; a bad file writes nothing and names its record; the imported sessions
are searchable and reflectable."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from memplane import MemoryClient
from tests.support.chat_exports import chatgpt_export

pytestmark = pytest.mark.slow
CONVERSATIONS, MESSAGES = 50, 20  # 1,000 messages


def run_import(target: str, key: str, *args: str, wait: bool = True):
    command = [sys.executable, "-m", "memplane_server.cli", "import-chats", *args, "--target", target]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}, "MEMPLANE_API_KEY": key}
    if not wait:
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def imported(client: MemoryClient) -> list:
    return [m for m in client.iter_memories(kinds="turn", page_size=500) if m.source_type == "chat-import:chatgpt"]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return chatgpt_export(tmp_path_factory.mktemp("chats") / "conversations.json", CONVERSATIONS, MESSAGES)


def test_an_export_imported_twice_stores_each_message_once(server, new_tenant, export):
    _, key = new_tenant()
    first = run_import(server.target, key, str(export), "--format", "chatgpt", "--user-id", "u-1")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"conversations": 50, "messages": 1000, "written": 1000, "already": 0,
                                        "dry_run": False}
    again = run_import(server.target, key, str(export), "--format", "chatgpt", "--user-id", "u-1")
    assert json.loads(again.stdout)["written"] == 0 and json.loads(again.stdout)["already"] == 1000
    with MemoryClient(server.target, key) as client:
        turns = imported(client)
        assert len(turns) == 1000 and len({t.source_id for t in turns}) == 1000
        first_turn = min((t for t in turns if t.session_id == "chatgpt:conv-7"), key=lambda t: t.occurred_at)
        assert first_turn.content == "user: conversation 7 message 0 about the harbour trip"
        assert first_turn.user_id == "u-1" and first_turn.metadata["speaker"] == "user"
        hits = client.search("conversation 7 message 13 harbour trip", top_k=5).hits
        assert any(h.memory.session_id == "chatgpt:conv-7" for h in hits)
        reflected = client.reflect(session_id="chatgpt:conv-7", user_id="u-1")
        assert reflected.summary and reflected.memories


def test_an_import_killed_halfway_and_run_again_stores_the_rest_once(server, new_tenant, export):
    _, key = new_tenant()
    process = run_import(server.target, key, str(export), "--format", "chatgpt", "--batch", "10", wait=False)
    with MemoryClient(server.target, key) as client:
        deadline = time.monotonic() + 300
        while len(imported(client)) < 200:
            assert time.monotonic() < deadline and process.poll() is None, "the import did not get going"
            time.sleep(0.2)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        cut = len(imported(client))
        assert 200 <= cut < 1000
        resumed = run_import(server.target, key, str(export), "--format", "chatgpt")
        assert resumed.returncode == 0, resumed.stderr
        report = json.loads(resumed.stdout)
        turns = imported(client)
    assert len(turns) == 1000 and len({t.source_id for t in turns}) == 1000
    assert report["written"] + report["already"] == 1000 and report["written"] >= 1000 - cut


def test_a_dry_run_counts_and_writes_nothing(server, new_tenant, export):
    _, key = new_tenant()
    done = run_import(server.target, key, str(export), "--format", "chatgpt", "--dry-run")
    assert json.loads(done.stdout)["written"] == 1000
    with MemoryClient(server.target, key) as client:
        assert imported(client) == []


def test_a_bad_file_writes_nothing_and_names_its_record(server, new_tenant, export, tmp_path):
    _, key = new_tenant()
    records = json.loads(export.read_text())
    del records[30]["mapping"]
    bad = tmp_path / "conversations.json"
    bad.write_text(json.dumps(records))
    done = run_import(server.target, key, str(bad), "--format", "chatgpt")
    assert done.returncode == 1 and "conversation 30 (conv-30): needs an id and a 'mapping'" in done.stderr
    with MemoryClient(server.target, key) as client:
        assert imported(client) == []
