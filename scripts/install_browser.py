"""Installs the browser the panel's tests drive (tests/e2e/test_panel_browser.py): Debian's chromium
at /usr/bin/chromium, and a font with Chinese glyphs so screenshots show Chinese memories as text.
Playwright, which drives it, is a dev dependency in pyproject.toml; its own browser downloads are
not used (they come from outside the package registries).

Run by `make` on every install; idempotent. Installs with apt-get, so only as root on a Debian-like
system; elsewhere it says what is missing, and the browser tests skip, naming it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
PACKAGES = {"chromium": CHROMIUM, "fonts-wqy-zenhei": Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")}


def main() -> int:
    missing = [name for name, path in PACKAGES.items() if not path.exists()]
    if not missing:
        return 0
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        print(f"browser tests: cannot install {', '.join(missing)} (needs apt-get as root)"
              + ("; the panel's browser tests will be skipped" if "chromium" in missing else ""))
        return 0
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    # The package lists may be missing or old on a fresh machine: update them once if the install fails.
    if subprocess.run(install, env=env).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env)
        if subprocess.run(install, env=env).returncode != 0:
            print(f"browser tests: apt-get could not install {', '.join(missing)}; the panel's browser tests "
                  "will be skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
