"""The lint and type gate `make test` runs before the tests: ruff (pyflakes, import order,
bugbear) over the tree, then mypy over what [tool.mypy] in pyproject.toml names as checked.

With paths, it checks those instead (the tests plant an error in a scratch file to see the gate
fail). Exit status: 0 clean, 1 anything found.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The server's domain and use cases; the SDK's public API is held to --strict on top.
TYPED = ["server/memplane_server/core", "server/memplane_server/services"]
STRICT = ["clients/python/memplane"]


def run(*command: str) -> int:
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, cwd=ROOT).returncode


def main(paths: list[str]) -> int:
    python = sys.executable
    failed = run(python, "-m", "ruff", "check", *(paths or ["."]))
    if paths:
        failed |= run(python, "-m", "mypy", *paths)
        return 1 if failed else 0
    failed |= run(python, "-m", "mypy", *TYPED)
    failed |= run(python, "-m", "mypy", "--strict", *STRICT)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
