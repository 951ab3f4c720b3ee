"""The lint and type gate (scripts/lint.py) that `make test` runs first fails on what it guards against."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LINT = Path(__file__).resolve().parents[2] / "scripts" / "lint.py"


def gate(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    planted = tmp_path / "planted.py"
    planted.write_text(source)
    return subprocess.run([sys.executable, str(LINT), str(planted)], capture_output=True, text=True, timeout=120)


def test_a_clean_file_passes(tmp_path):
    result = gate(tmp_path, "from __future__ import annotations\n\n\ndef double(n: int) -> int:\n    return n * 2\n")
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_unused_import_fails_the_gate(tmp_path):
    result = gate(tmp_path, "import os\n")
    assert result.returncode == 1 and "F401" in result.stdout


def test_a_type_error_fails_the_gate(tmp_path):
    result = gate(tmp_path, "def double(n: int) -> int:\n    return n * 2\n\n\ndouble('x')\n")
    assert result.returncode == 1 and "arg-type" in result.stdout
