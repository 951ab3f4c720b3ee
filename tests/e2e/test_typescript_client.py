"""The TypeScript client (clients/typescript) under Node: its rules without a server (retry
decisions, targets, error details), its node:test suite against a real server (write, search,
reflect, forget, typed errors, a request id applied once, another tenant kept out, deadlines), a
watch and a write that outlast a restart of their server, and its quickstart example."""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from memplane import AdminClient, MemoryClient
from tests.conftest import make_shared_tmpdir
from tests.e2e.conftest import ServerProcess, fresh_database, restartable_port

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
TSC = PACKAGE / "node_modules" / ".bin" / "tsc"


@pytest.fixture(scope="module")
def built() -> Path:
    """The client and its tests compiled (dist/), as `npm run build` does."""
    assert TSC.exists(), "the TypeScript tools are missing: `make test` installs them (scripts/install_node_tools.py)"
    shutil.rmtree(PACKAGE / "dist", ignore_errors=True)
    done = subprocess.run([str(TSC), "-p", "tsconfig.json"], cwd=PACKAGE, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return PACKAGE / "dist"


def node_env(**values: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}, **values}


def test_the_clients_own_rules_hold_without_a_server(built):
    done = subprocess.run(["node", "--test", "--test-reporter=spec", str(built / "test" / "unit.test.js")],
                          cwd=PACKAGE, capture_output=True, text=True, timeout=120, env=node_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^ℹ fail 0$", done.stdout, re.M) and re.search(r"^ℹ pass 9$", done.stdout, re.M)


NAMES_OF = """
import { AdminClient, MemoryClient } from "./dist/src/index.js";
const names = (client) => {
  const out = new Set(Object.getOwnPropertyNames(client));
  for (let p = Object.getPrototypeOf(client); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Object.getOwnPropertyNames(p)) out.add(name);
  }
  client.close();
  return [...out].filter((name) => typeof client[name] === "function");
};
const options = { apiKey: "unused" };
console.log(JSON.stringify({ memory: names(new MemoryClient("127.0.0.1:1", options)),
                             admin: names(new AdminClient("127.0.0.1:1", options)) }));
"""


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def python_methods(cls: type) -> set[str]:
    return {camel(name) for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


def test_every_method_of_the_python_async_clients_is_a_method_of_the_typescript_ones(built):
    from memplane import AsyncAdminClient, AsyncMemoryClient

    done = subprocess.run(["node", "--input-type=module", "-e", NAMES_OF], cwd=PACKAGE, capture_output=True,
                          text=True, timeout=60, env=node_env())
    assert done.returncode == 0, done.stderr
    names = json.loads(done.stdout)
    assert python_methods(AsyncMemoryClient) - set(names["memory"]) == set()
    assert python_methods(AsyncAdminClient) - set(names["admin"]) == set()


def test_the_node_test_suite_passes_against_a_real_server(built, server, new_tenant):
    _, key = new_tenant()
    _, other = new_tenant()
    done = subprocess.run(["node", "--test", "--test-reporter=spec", str(built / "test" / "memory.test.js")],
                          cwd=PACKAGE, capture_output=True, text=True, timeout=300,
                          env=node_env(MEMPLANE_ADDRESS=server.target, MEMPLANE_API_KEY=key,
                                       MEMPLANE_OTHER_API_KEY=other))
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^ℹ fail 0$", done.stdout, re.M) and re.search(r"^ℹ pass 9$", done.stdout, re.M)


@pytest.fixture
def two_servers(services_urls):
    database_url, redis_url = services_urls
    common = {"MEMPLANE_DATABASE_URL": asyncio.run(fresh_database(database_url, "memplane_typescript")),
              "MEMPLANE_REDIS_URL": redis_url.rsplit("/", 1)[0] + "/9", "MEMPLANE_SHUTDOWN_GRACE_SECONDS": "2"}
    dirs = [make_shared_tmpdir(f"memplane-ts-{n}-") for n in "ab"]
    writer = ServerProcess({**common, "MEMPLANE_DATA_DIR": str(dirs[0]), "MEMPLANE_BOOTSTRAP_TENANT": "acme"}).start()
    watched = ServerProcess({**common, "MEMPLANE_DATA_DIR": str(dirs[1]), "MEMPLANE_BOOTSTRAP_TENANT": ""})
    watched.start(port=restartable_port())
    yield writer, watched
    watched.stop()
    writer.stop()
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


def test_a_watch_and_a_write_outlast_a_restart_of_their_server(built, two_servers):
    writer, watched = two_servers
    name = f"ts-{uuid.uuid4().hex[:8]}"
    with AdminClient(writer.target, writer.key("platform admin")) as admin:
        key = admin.create_tenant(name, create_admin_key=True).admin_key.secret
    port = int(watched.target.rsplit(":", 1)[1])
    scenario = subprocess.Popen(["node", str(built / "test" / "restart_scenario.js")], cwd=PACKAGE, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=node_env(WATCHED=watched.target, MEMPLANE_API_KEY=key))
    try:
        with MemoryClient(writer.target, key) as client:
            assert scenario.stdout.readline().strip() == "watching"
            client.write([{"content": f"before {i}", "kind": "event"} for i in range(3)])
            scenario.stdin.write("written\n")
            scenario.stdin.flush()
            assert scenario.stdout.readline().strip() == "seen"
            assert watched.stop() == 0
            client.write([{"content": f"while down {i}", "kind": "event"} for i in range(3)])
            scenario.stdin.write("down\n")
            scenario.stdin.flush()
            assert scenario.stdout.readline().strip() == "writing"
            watched.start(port=port)
            result = json.loads(scenario.stdout.readline())
            assert scenario.wait(60) == 0
            stored = [m for m in client.iter_memories(kinds=["event"]) if m.content == "written across a restart"]
    finally:
        scenario.kill()
    assert result["first"] == result["again"] and [m.id for m in stored] == [result["first"]]
    contents = [e["content"] for e in result["events"]]
    assert contents == [f"before {i}" for i in range(3)] + [f"while down {i}" for i in range(3)] + [
        "written across a restart"]
    positions = [int(e["position"]) for e in result["events"]]
    assert positions == sorted(set(positions))


def test_the_quickstart_example_finds_what_it_wrote(built, server, new_tenant):
    _, key = new_tenant()
    done = subprocess.run(["node", str(built / "examples" / "quickstart.js")], capture_output=True, text=True,
                          timeout=120, env=node_env(MEMPLANE_ADDRESS=server.target, MEMPLANE_API_KEY=key))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("wrote ") == 3
    _, where, deploy = done.stdout.split("search: ")
    assert "The user lives in Shanghai" in where.splitlines()[1]
    assert "Deploys to staging need the VPN switched on" in deploy.splitlines()[1]


def test_the_quickstart_example_given_a_wrong_key_exits_with_the_servers_reason(built, server):
    done = subprocess.run(["node", str(built / "examples" / "quickstart.js")], capture_output=True, text=True,
                          timeout=120, env=node_env(MEMPLANE_ADDRESS=server.target,
                                                    MEMPLANE_API_KEY="mpk_wrong_0000000000000000"))
    assert done.returncode == 1
    assert "memplane call failed: UNAUTHENTICATED [INVALID_API_KEY]" in done.stderr, done.stderr
