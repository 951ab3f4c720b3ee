"""The client's tools as commands, with no server: `memplane mcp` and `memplane panel` (the server's
command line) and `memplane-mcp` / `memplane-panel` (the client's) without their extra end in one
line naming the pip command, exit 2; the client's own entries run with the client alone."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memplane._extras import EXTRA_MODULES

# Python run as if the extra's modules were not installed: a finder ahead of every other one refuses
# them, as a missing distribution would, before the command is imported.
WITHOUT = """
import sys

class Uninstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Uninstalled())
from {module} import main
sys.exit(main(sys.argv[1:]))
"""
COMMANDS = {"server": ("memplane_server.cli", "memplane {tool}"), "client": ("memplane.{tool}.command", "memplane-{tool}")}


def run(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLANE_")}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("tool", sorted(EXTRA_MODULES))
@pytest.mark.parametrize("side", sorted(COMMANDS))
def test_a_tool_without_its_extra_says_what_to_install_and_exits_2(side, tool):
    module, prog = (part.format(tool=tool) for part in COMMANDS[side])
    args = [tool] if side == "server" else []
    done = run(*args, code=WITHOUT.format(blocked=set(EXTRA_MODULES[tool]), module=module))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"{prog} needs the '{tool}' extra"), done.stderr
    assert f"pip install 'memplane-client[{tool}]'" in done.stderr


@pytest.mark.parametrize("package", ["mcp", "panel", "chats"])
def test_the_clients_own_entries_run_as_modules(package):
    done = run("-m", f"memplane.{package}", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m memplane.{package}")


def test_the_client_mcp_entry_needs_a_key_over_stdio():
    done = run("-m", "memplane.mcp")
    assert done.returncode == 2 and "set MEMPLANE_API_KEY" in done.stderr
