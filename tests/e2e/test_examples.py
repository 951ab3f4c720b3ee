"""Every program in examples/ runs as a user would run it, against a real server, and prints what
it claims to show: the examples are documentation that cannot rot unnoticed."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database
from tests.support.fake_llm import FakeLLM, Reply

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LEARNED = "The user wants a window seat on every flight"


def launch(name: str, **env: str) -> subprocess.CompletedProcess:
    """Runs examples/<name> given only the MEMPLANE_* settings passed here, as its docstring says."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}
    return subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=120,
                          env={**clean, **env})


def run_example(name: str, target: str, key: str) -> str:
    """Its stdout, run against target with key; it must succeed."""
    process = launch(name, MEMPLANE_ADDRESS=target, MEMPLANE_API_KEY=key)
    assert process.returncode == 0, process.stdout + process.stderr
    return process.stdout


@pytest.fixture(scope="module")
def llm_server(services_urls):
    """A server whose Reflect distils with a model: the fake LLM, answering the one reflection asked of it."""
    fake = FakeLLM().start()
    fake.script(Reply(json.dumps({
        "memories": [{"kind": "preference", "content": LEARNED, "context": "booking flights", "confidence": 0.9,
                      "steps": [1, 2, 3]}],
        "summary": "The user planned a trip to Kyoto and asked for window seats.",
    })))
    database_url, redis_url = services_urls
    proc = ServerProcess({
        "MEMPLANE_DATABASE_URL": asyncio.run(fresh_database(database_url, "memplane_examples")),
        "MEMPLANE_REDIS_URL": redis_url.rsplit("/", 1)[0] + "/6",
        "MEMPLANE_DATA_DIR": str(make_shared_tmpdir("memplane-examples-")),
        "MEMPLANE_BOOTSTRAP_TENANT": "acme",
        "MEMPLANE_BACKGROUND_WORK": "none",
        "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2",
        "MEMPLANE_LLM_MODEL": "openai/test-model", "MEMPLANE_LLM_API_BASE": fake.api_base,
        "MEMPLANE_LLM_API_KEY": "test",
    }).start()
    yield proc
    proc.stop()
    fake.stop()


def test_quickstart_finds_the_memories_it_wrote(server, new_tenant):
    _, key = new_tenant()
    out = run_example("quickstart.py", server.target, key)
    assert out.count("wrote ") == 3
    _, where, deploy = out.split("search: ")
    assert "The user lives in Shanghai" in where.splitlines()[1]
    assert "Deploys to staging need the VPN switched on" in deploy.splitlines()[1]


@pytest.mark.slow  # its own server, with a model
def test_agent_loop_reflects_the_session_with_the_model_and_recalls_what_it_learned(llm_server):
    out = run_example("agent_loop.py", llm_server.target, llm_server.key("tenant admin"))
    assert out.count("user: ") == 3 and out.count("assistant: ") == 3
    assert "(with an LLM)" in out and "summary: The user planned a trip to Kyoto" in out
    assert f"learned preference: {LEARNED}" in out
    assert f"next session recalls: {LEARNED}" in out


def test_shared_domain_shares_the_domain_memory_and_not_the_private_one(server, platform_key):
    out = run_example("shared_domain.py", server.target, platform_key)
    assert re.search(r"hotels found the travel-\w+ memory: 'Travellers to Kyoto.*' \(from tenant flights-\w+\)", out)
    assert "hotels did not find the flights team's private memory" in out


def test_watch_changes_sees_every_change_the_writer_made_in_order(server, new_tenant):
    _, key = new_tenant()
    out = run_example("watch_changes.py", server.target, key)
    kinds = re.findall(r"^event \d: #\d+ (\w+)", out, re.MULTILINE)
    assert kinds == ["created", "created", "superseded", "created", "updated", "forgotten"]


def test_mcp_client_lists_the_tools_and_recalls_what_it_remembered(server, new_tenant):
    _, key = new_tenant()
    out = run_example("mcp_client.py", server.target, key)
    assert "tools: remember, recall, reflect, forget, memory_history, working_memory" in out
    remembered = re.search(r"remember -> \S+: (.*)", out).group(1)
    recalled = re.findall(r"^recall -> \S+ (.*)$", out, re.MULTILINE)
    assert recalled == [remembered]


# Those that catch MemplaneError and print the server's code and reason (mcp_client.py talks to
# `memplane mcp`, whose tools answer errors as MCP tool results).
CATCHING = sorted(path.name for path in EXAMPLES.glob("*.py") if "except MemplaneError" in path.read_text())


@pytest.mark.parametrize("name", CATCHING)
def test_an_example_given_a_wrong_key_exits_with_the_reason_the_server_sends(server, name):
    process = launch(name, MEMPLANE_ADDRESS=server.target, MEMPLANE_API_KEY="mpk_wrong_0000000000000000")
    assert process.returncode == 1
    assert "memplane call failed: UNAUTHENTICATED [INVALID_API_KEY]" in process.stderr, process.stderr


@pytest.mark.parametrize("name", sorted(path.name for path in EXAMPLES.glob("*.py")))
def test_an_example_without_a_key_exits_non_zero_naming_the_variable(name):
    process = launch(name)
    assert process.returncode == 1 and "set MEMPLANE_API_KEY" in process.stderr
