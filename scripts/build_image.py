"""Builds the project's Dockerfile with podman on a machine that reaches no image registry: the base
(the Dockerfile's PYTHON_IMAGE build argument, whose default stays the public python image users
pull) is made here from Debian's packages with debootstrap and `podman import`, once, then the image.

    python scripts/build_image.py [--tag memplane:local] [--base localhost/memplane-base:bookworm]

Needs root and the runtime of scripts/install_container_runtime.py. Prints the image's size. The
host's CA bundle goes to the build as the secret pip-ca, so that pip in the build trusts what pip on
the host trusts (a proxy that inspects TLS, where there is one).
"""
from __future__ import annotations

import argparse
import shutil
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAG = "memplane:local"
BASE = "localhost/memplane-base:bookworm"
SUITE = "bookworm"
# What the Dockerfile's stages need of a python image: python (by that name), venv, the CA bundle;
# groupadd and useradd are in every Debian base.
BASE_PACKAGES = ["python3", "python3-venv", "python-is-python3", "ca-certificates"]


def podman(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], check=True, **kw)


def exists(image: str) -> bool:
    return subprocess.run(["podman", "image", "exists", image]).returncode == 0


def make_base(image: str) -> None:
    """A minimal Debian with Python, imported as an image."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE,
                        str(rootfs)], check=True, stdout=subprocess.DEVNULL)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        podman("import", "--change", 'CMD ["python3"]', "-", image, stdin=tar.stdout, stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            raise RuntimeError("tar of the base's root filesystem failed")


def ca_bundle() -> str | None:
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def build(tag: str, base: str, context: Path = ROOT, dockerfile: Path | None = None) -> int:
    """Builds the image; returns its size in bytes."""
    args = ["build", "--format", "docker", "--network=host", "--build-arg", f"PYTHON_IMAGE={base}", "-t", tag]
    if bundle := ca_bundle():
        args += ["--secret", f"id=pip-ca,src={bundle}"]
    if dockerfile is not None:
        args += ["-f", str(dockerfile)]
    podman(*args, str(context))
    return int(podman("image", "inspect", "--format", "{{.Size}}", tag, capture_output=True, text=True).stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tag", default=TAG)
    ap.add_argument("--base", default=BASE)
    a = ap.parse_args()
    for tool in ("podman", "debootstrap"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (scripts/install_container_runtime.py installs it)", file=sys.stderr)
            return 1
    if not exists(a.base):
        make_base(a.base)
    size = build(a.tag, a.base)
    print(f"built {a.tag} on {a.base}: {size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
