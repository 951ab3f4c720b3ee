"""The image built from the Dockerfile runs as platform teams run it: as its non-root user, on a
read-only root filesystem, configured by MEMPLANE_* variables alone, healthy by its own HEALTHCHECK,
with nothing fetched at start; and it serves, migrates and works against outside databases."""
from __future__ import annotations

import asyncio
import textwrap

import pytest

from memplane import MemoryClient
from scripts import build_image
from tests.containers.conftest import container, free_port, podman, serving
from tests.e2e.conftest import fresh_database

# The image's own user (Dockerfile), which runAsNonRoot checks by number.
IMAGE_UID = "10001"

SDK_ROUND_TRIP = textwrap.dedent("""
    import sys
    from memplane import MemoryClient
    with MemoryClient(sys.argv[1], sys.argv[2]) as client:
        client.write_one("The staging cluster moved to the Frankfurt region", kind="fact")
        [hit, *_] = client.search("Where is the staging cluster?", top_k=1).hits
        assert "Frankfurt" in hit.memory.content, hit
    print("round trip ok")
""")


def test_the_image_serves_and_embeds_on_a_read_only_root_as_its_user_with_loopback_only(image):
    """--network=none leaves loopback alone: the model, PostgreSQL and Redis must all be inside."""
    with container(image, "serve", options=("--read-only", "--network=none")) as started:
        address, key = serving(started)
        assert started.exec("id", "-u").stdout.strip() == IMAGE_UID
        assert started.exec("python", "-c", SDK_ROUND_TRIP, address.replace("0.0.0.0", "127.0.0.1"), key
                            ).stdout.strip() == "round trip ok"


def test_the_sdk_outside_the_container_writes_and_searches(image):
    port = free_port()
    with container(image, "serve", options=("--read-only", "--network=host",
                                            "-e", f"MEMPLANE_LISTEN=127.0.0.1:{port}")) as started:
        address, key = serving(started)
        assert address == f"127.0.0.1:{port}"
        with MemoryClient(address, key) as client:
            stored = client.write_one("Deploys freeze on Fridays after 3pm", kind="fact")
            hits = client.search("When do deploys freeze?", top_k=3).hits
        assert stored.id in [h.memory.id for h in hits]


def test_migrate_then_worker_and_server_run_against_outside_databases(image, services_urls):
    # A database of its own: the server bootstraps its tenant only into an empty one.
    database_url = asyncio.run(fresh_database(services_urls[0], "memplane_containers"))
    redis_url = services_urls[1]
    outside = ("--read-only", "--network=host", "-e", f"MEMPLANE_DATABASE_URL={database_url}",
               "-e", f"MEMPLANE_REDIS_URL={redis_url}", "-e", "MEMPLANE_MIGRATE_ON_START=false")
    migrated = podman("run", "--rm", *outside, image, "migrate", check=False)
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    port = free_port()
    with container(image, "worker", options=outside) as worker, \
            container(image, "serve", options=(*outside, "-e", f"MEMPLANE_LISTEN=127.0.0.1:{port}",
                                                "-e", "MEMPLANE_BACKGROUND_WORK=none",
                                                "-e", "MEMPLANE_BOOTSTRAP_TENANT=containers")) as server:
        address, key = serving(server)
        with MemoryClient(address, key) as client:
            client.write_one("The on-call rota changes every Monday", kind="fact")
            assert client.search("When does the rota change?", top_k=1).hits
        assert podman("inspect", "--format", "{{.State.Running}}", worker.name).stdout.strip() == "true", worker.logs()


def test_a_server_that_writes_under_the_read_only_root_fails_the_check(image, tmp_path):
    """The check finds what it is for: the same image told to keep its data under /opt (read-only
    there) never turns healthy."""
    (tmp_path / "Containerfile").write_text(f"FROM {image}\nENV MEMPLANE_DATA_DIR=/opt/memplane/state\n")
    broken = "memplane-test-broken:local"
    podman("build", "--format", "docker", "-t", broken, str(tmp_path))
    try:
        with container(broken, "serve", options=("--read-only", "--network=none")) as started:
            with pytest.raises(AssertionError, match="exited|never"):
                serving(started)
            assert "Read-only file system" in started.logs() or "read-only" in started.logs().lower()
    finally:
        podman("rmi", "-f", broken, check=False)


def test_the_base_is_a_build_argument_whose_default_stays_the_public_image(image):
    dockerfile = (build_image.ROOT / "Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in dockerfile
    assert dockerfile.count("FROM ${PYTHON_IMAGE}") == 2
    assert podman("image", "inspect", "--format", "{{.Parent}}", image).returncode == 0
