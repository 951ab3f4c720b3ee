"""Debian packages for the install scripts (run by `make`): apt-get as root, the package lists
updated once if the first try fails (they may be missing or old on a fresh machine)."""
from __future__ import annotations

import os
import shutil
import subprocess


def apt_install(packages: list[str], purpose: str) -> bool:
    """Installs the packages; False (having said why, and that `purpose` is skipped) when it cannot."""
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        print(f"{purpose}: cannot install {', '.join(packages)} (needs apt-get as root); they will be skipped")
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(install, env=env).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env)
        if subprocess.run(install, env=env).returncode != 0:
            print(f"{purpose}: apt-get could not install {', '.join(packages)}; they will be skipped")
            return False
    return True
