"""Generates the Python protobuf and gRPC modules of the SDK from proto/.

Run with --check to fail (exit 1) when the committed output differs from what would be
generated, which CI does so that the contract and the SDK never drift apart.
"""
from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
OUT_ROOT = ROOT / "clients" / "python"
PACKAGE_DIR = Path("memplane") / "v1"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi")


def generate(out_root: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / PACKAGE_DIR).glob("*.proto"))
    include = str(Path(protoc.__file__).parent / "_proto")
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def generated_files(root: Path) -> dict[str, Path]:
    folder = root / PACKAGE_DIR
    return {p.name: p for p in folder.iterdir() if p.name.endswith(GENERATED_SUFFIXES)} if folder.exists() else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh_root = Path(tmp)
        generate(fresh_root)
        fresh = generated_files(fresh_root)
        current = generated_files(OUT_ROOT)
        stale = sorted(
            name for name in fresh.keys() | current.keys()
            if name not in fresh or name not in current or not filecmp.cmp(fresh[name], current[name], shallow=False)
        )
        if args.check:
            if stale:
                print("generated code is stale; run scripts/gen_proto.py: " + ", ".join(stale), file=sys.stderr)
                return 1
            return 0
        (OUT_ROOT / PACKAGE_DIR).mkdir(parents=True, exist_ok=True)
        for name in stale:
            if name in current and name not in fresh:
                current[name].unlink()
            else:
                shutil.copyfile(fresh[name], OUT_ROOT / PACKAGE_DIR / name)
        print(f"generated {len(fresh)} files, {len(stale)} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
