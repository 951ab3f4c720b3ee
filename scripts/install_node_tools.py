"""Installs what the TypeScript client and the proto checks need: Node.js and npm (Debian's nodejs
and npm, where the machine has no node), then the npm packages of clients/typescript exactly as
its package-lock.json pins them (`npm ci`): the client's own (@grpc/grpc-js, @bufbuild/protobuf),
TypeScript, protoc-gen-es (scripts/gen_proto.py) and buf, which lints the protos and checks them
against the released contract (tests/integration/test_proto_contract.py).

Run by `make` when the lockfile changes; idempotent.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from debian_packages import apt_install

PACKAGE = Path(__file__).resolve().parents[1] / "clients" / "typescript"


def main() -> int:
    if shutil.which("node") is None or shutil.which("npm") is None:
        if not apt_install(["nodejs", "npm"], "the TypeScript client and the proto contract checks"):
            return 1
    done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=PACKAGE)
    if done.returncode != 0:
        print("npm ci failed in clients/typescript", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
