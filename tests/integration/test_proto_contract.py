"""The gRPC contract cannot break by accident: buf lint holds proto/ to the house rules and buf
breaking holds it to the released contract (proto/released.binpb), so an old client keeps working.
buf comes from clients/typescript's npm packages (`make test` installs them)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUF = ROOT / "clients" / "typescript" / "node_modules" / ".bin" / "buf"
RELEASED = ROOT / "proto" / "released.binpb"
SERVICE = Path("memplane/v1/memory_service.proto")


def buf(*args: str | Path) -> subprocess.CompletedProcess:
    assert BUF.exists(), "buf is missing: `make test` installs it (scripts/install_node_tools.py)"
    return subprocess.run([str(BUF), *map(str, args)], capture_output=True, text=True, timeout=120)


def planted(tmp_path: Path, old: str, new: str, file: Path = SERVICE) -> Path:
    """A copy of proto/ with one change."""
    copy = tmp_path / "proto"
    shutil.copytree(ROOT / "proto", copy, ignore=shutil.ignore_patterns("*.binpb"))
    text = (copy / file).read_text()
    assert text.count(old) == 1, old
    (copy / file).write_text(text.replace(old, new))
    return copy


def test_the_protos_keep_the_house_rules():
    result = buf("lint", ROOT / "proto")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_protos_keep_the_released_contract():
    result = buf("breaking", ROOT / "proto", "--against", RELEASED)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("old", "new", "said"), [
    ("  bool skipped = 6;\n", "  bool skipped = 9;\n", 'Previously present field "6" with name "skipped"'),
    ("  bool skipped = 6;\n", "", 'Previously present field "6" with name "skipped"'),
    ("  bool skipped = 6;\n", "  int32 skipped = 6;\n", 'changed type from "bool" to "int32"'),
], ids=["renumbered", "removed", "retyped"])
def test_a_change_that_breaks_old_clients_fails(tmp_path, old, new, said):
    result = buf("breaking", planted(tmp_path, old, new), "--against", RELEASED)
    assert result.returncode != 0 and said in result.stdout, result.stdout + result.stderr


def test_an_enum_zero_value_not_named_unspecified_fails_the_lint(tmp_path):
    proto = planted(tmp_path, "KIND_UNSPECIFIED = 0;", "KIND_NONE = 0;", Path("memplane/v1/memory.proto"))
    result = buf("lint", proto)
    assert result.returncode != 0 and "KIND_NONE" in result.stdout, result.stdout + result.stderr
