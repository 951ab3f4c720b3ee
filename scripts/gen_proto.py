"""Generates the SDKs' protobuf code from proto/: the Python protobuf and gRPC modules
(clients/python/memplane/v1) and the TypeScript message and service modules (clients/typescript/
src/gen, by buf with protoc-gen-es from clients/typescript's npm packages, with google.rpc's Status
and ErrorInfo, whose protos come with the Python package googleapis-common-protos).

Run with --check to fail (exit 1) when the committed output differs from what would be
generated, which CI does so that the contract and the SDKs never drift apart.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from google.rpc import status_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PACKAGE_DIR = Path("memplane") / "v1"
PYTHON_OUT = ROOT / "clients" / "python"
PYTHON_SUFFIXES = ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi")
TYPESCRIPT = ROOT / "clients" / "typescript"
TYPESCRIPT_OUT = TYPESCRIPT / "src" / "gen"
GOOGLE_RPC = ("google/rpc/status.proto", "google/rpc/error_details.proto")


def generate_python(out_root: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / PACKAGE_DIR).glob("*.proto"))
    include = str(Path(protoc.__file__).parent / "_proto")
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={out_root}", f"--pyi_out={out_root}",
            f"--grpc_python_out={out_root}", *protos]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def python_files(root: Path) -> dict[str, Path]:
    folder = root / PACKAGE_DIR
    return {str(PACKAGE_DIR / p.name): p for p in folder.iterdir() if p.name.endswith(PYTHON_SUFFIXES)} \
        if folder.exists() else {}


def generate_typescript(out_root: Path) -> None:
    tools = TYPESCRIPT / "node_modules" / ".bin"
    if not (tools / "buf").exists():
        raise SystemExit("buf is missing: run scripts/install_node_tools.py (make does)")
    googleapis = Path(status_pb2.__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as tmp:
        rpc = Path(tmp) / "googleapis"  # only the two files: the package holds many more
        for name in GOOGLE_RPC:
            (rpc / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(googleapis / name, rpc / name)
        config = {"version": "v2", "inputs": [{"directory": str(PROTO_ROOT)}, {"directory": str(rpc)}],
                  "plugins": [{"local": str(tools / "protoc-gen-es"), "out": str(out_root),
                               "opt": ["target=ts", "import_extension=js"]}]}
        template = Path(tmp) / "buf.gen.json"
        template.write_text(json.dumps(config))
        done = subprocess.run([str(tools / "buf"), "generate", "--template", str(template)], cwd=tmp,
                              capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("buf generate failed: " + done.stderr)


def typescript_files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in root.rglob("*.ts")} if root.exists() else {}


# Where each SDK's generated code goes, how it is made and which files it is.
TARGETS: list[tuple[Path, Callable[[Path], None], Callable[[Path], dict[str, Path]]]] = [
    (PYTHON_OUT, generate_python, python_files),
    (TYPESCRIPT_OUT, generate_typescript, typescript_files),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed code is stale")
    args = parser.parse_args()
    stale_anywhere, made = [], 0
    for out_root, generate, files in TARGETS:
        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp))
            fresh, current = files(Path(tmp)), files(out_root)
            stale = sorted(
                name for name in fresh.keys() | current.keys()
                if name not in fresh or name not in current or not filecmp.cmp(fresh[name], current[name], shallow=False)
            )
            made += len(fresh)
            stale_anywhere += [str((out_root / name).relative_to(ROOT)) for name in stale]
            if args.check:
                continue
            for name in stale:
                if name not in fresh:
                    current[name].unlink()
                else:
                    (out_root / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(fresh[name], out_root / name)
    if args.check:
        if stale_anywhere:
            print("generated code is stale; run scripts/gen_proto.py: " + ", ".join(stale_anywhere), file=sys.stderr)
            return 1
        return 0
    print(f"generated {made} files, {len(stale_anywhere)} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
