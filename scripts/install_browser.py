"""Installs the browser the panel's tests drive (tests/e2e/test_panel_browser.py): Debian's chromium
at /usr/bin/chromium, and a font with Chinese glyphs so screenshots show Chinese memories as text.
Playwright, which drives it, is a dev dependency in pyproject.toml; its own browser downloads are
not used (they come from outside the package registries).

Run by `make` on every install; idempotent. Installs with apt-get, so only as root on a Debian-like
system; elsewhere it says what is missing, and the browser tests skip, naming it.
"""
from __future__ import annotations

from pathlib import Path

from debian_packages import apt_install

CHROMIUM = Path("/usr/bin/chromium")
PACKAGES = {"chromium": CHROMIUM, "fonts-wqy-zenhei": Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")}


def main() -> int:
    missing = [name for name, path in PACKAGES.items() if not path.exists()]
    if missing:
        apt_install(missing, "the panel's browser tests")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
