"""Installs and configures the container runtime the container checks run on (tests/containers):
Debian's podman with runc, podman-compose, debootstrap (the local base image: scripts/build_image.py)
pgbouncer, and what compose networks and pods need (dnsname, catatonit).

These machines have no Docker daemon and reach no image registry, but podman runs containers as
root once two defaults are changed, which a drop-in file does: crun fails on this kernel's hybrid
cgroups, so runc, with the cgroupfs manager (no systemd); and no default nofile/nproc ulimits, which
the sandbox refuses to raise. The network is the host's (`--network=host`) or none: no bridge
plugins are needed.

Run by `make deploy-test` (and so by .ci/run); idempotent. Installs with apt-get, so only as root on
a Debian-like system; elsewhere it says what is missing and the container checks skip, naming it.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from debian_packages import apt_install

PACKAGES = {"podman": "podman", "runc": "runc", "podman-compose": "podman-compose", "debootstrap": "debootstrap",
            "pgbouncer": "pgbouncer",
            # service names resolve between containers on a compose network (CNI's dnsname plugin)
            "golang-github-containernetworking-plugin-dnsname": "/usr/lib/cni/dnsname",
            # the init of the pause image a pod's infra container runs (`podman kube play`)
            "catatonit": "catatonit"}
DROP_IN = Path("/etc/containers/containers.conf.d/memplane.conf")
SETTINGS = """# Written by memplane's scripts/install_container_runtime.py: runc with cgroupfs (crun fails on
# hybrid cgroups without systemd) and no default ulimits (the sandbox refuses to raise them).
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
"""


def main() -> int:
    missing = [package for package, command in PACKAGES.items() if shutil.which(command) is None]
    if missing and not apt_install(missing, "the container checks"):
        return 0
    if os.geteuid() == 0 and (not DROP_IN.exists() or DROP_IN.read_text() != SETTINGS):
        DROP_IN.parent.mkdir(parents=True, exist_ok=True)
        DROP_IN.write_text(SETTINGS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
