"""Writes proto/released.binpb: the contract a release ships (a buf image of proto/, without source
info), which `make test` holds later protos to with `buf breaking` (tests/integration/
test_proto_contract.py). Run it when a release is cut, never to make a failing check pass: a change
that breaks old clients goes in a new package version (memplane.v2) instead.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUF = ROOT / "clients" / "typescript" / "node_modules" / ".bin" / "buf"


def main() -> int:
    return subprocess.run([str(BUF), "build", "proto", "--exclude-source-info", "-o", "proto/released.binpb"],
                          cwd=ROOT).returncode


if __name__ == "__main__":
    raise SystemExit(main())
