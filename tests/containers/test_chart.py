"""The Helm chart's manifests run: rendered by helm with a values file for this check and started by
`podman kube play` (a real runner of Kubernetes Pods, Deployments and ConfigMaps) from the built
image, against the tests' PostgreSQL and Redis. The migration Job's pod runs `memplane migrate` to
success first; then the server and worker Deployments' pods start with the chart's ConfigMap,
Secret and security context, and the server's probes, which the runner cannot run (gRPC probes),
are run as the kubelet runs them. What no runner here does (Services, the HPA, PDBs,
NetworkPolicies) stays covered by tests/deploy's schema checks (docs/operations.md)."""
from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memplane import MemoryClient
from scripts import build_image
from tests.containers.conftest import free_port, podman
from tests.deploy.conftest import tool
from tests.e2e.conftest import fresh_database

CHART = build_image.ROOT / "deploy" / "helm" / "memplane"
LIVENESS = "liveness"  # the health service name of the startup and liveness probes


def values(image: str, database_url: str, redis_url: str, port: int) -> dict:
    repository, tag = image.rsplit(":", 1)
    return {
        "image": {"repository": f"localhost/{repository}", "tag": tag, "pullPolicy": "Never"},
        "secrets": {"databaseUrl": database_url, "redisUrl": redis_url},
        "config": {"BOOTSTRAP_TENANT": "chart", "LOG_LEVEL": "INFO"},
        # The pods share the host's network here (the runner cannot give them the cluster's):
        # one server, on a free port, and no metrics port that server and worker would both bind.
        "server": {"replicas": 1, "autoscaling": {"enabled": False}, "podDisruptionBudget": {"enabled": False}},
        "metrics": {"enabled": False},
        "service": {"port": port},
    }


def podman_secret(secret: dict) -> dict:
    """What `podman kube play` (4.3) reads for an envFrom secretRef: a podman secret holding the
    Secret's keys as JSON, each value base64 (it mis-reads the Secret it is given in the YAML)."""
    data = {k: base64.b64encode(v.encode()).decode() for k, v in (secret.get("stringData") or {}).items()}
    return {**data, **(secret.get("data") or {})}


def for_the_runner(manifest: dict) -> dict:
    """On the host's network a container's ports would be host ports: the runner refuses them."""
    if manifest["kind"] in ("Deployment", "Pod"):
        spec = manifest["spec"]["template"]["spec"] if manifest["kind"] == "Deployment" else manifest["spec"]
        for container in spec["containers"]:
            container.pop("ports", None)
    return manifest


def job_as_pod(job: dict) -> dict:
    """The runner has no Jobs: the Job's pod template, run once as a Pod."""
    template = job["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": job["metadata"]["name"],
                                                           "labels": template["metadata"]["labels"]},
            "spec": template["spec"]}


def play(manifests: list[dict], folder: Path, name: str) -> None:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all([for_the_runner(m) for m in manifests]))
    podman("kube", "play", "--network", "host", str(path))


def probe(port: int, service: str) -> str:
    """A gRPC health probe, as the kubelet sends it: the status's name, or the error's code."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=3)
        except grpc.RpcError as exc:
            return exc.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)


@dataclass
class Released:
    rendered: list[dict]
    port: int
    pods: list[str]

    def kind(self, kind: str, component: str | None = None) -> dict:
        return next(m for m in self.rendered if m["kind"] == kind and (
            component is None or m["metadata"]["labels"].get("app.kubernetes.io/component") == component))

    def container(self, component: str) -> str:
        return next(n for n in podman("ps", "-a", "--format", "{{.Names}}").stdout.split()
                    if n.endswith(f"-{component}") and not n.endswith("-infra"))


@pytest.fixture(scope="module")
def release(image, services_urls, tmp_path_factory) -> Iterator[Released]:
    folder = tmp_path_factory.mktemp("chart")
    name, port = f"check{uuid.uuid4().hex[:6]}", free_port()
    # A database of its own: the server bootstraps its tenant only into an empty one.
    database_url = asyncio.run(fresh_database(services_urls[0], "memplane_chart"))
    (folder / "values.yaml").write_text(yaml.safe_dump(values(image, database_url, services_urls[1], port)))
    rendered = subprocess.run([tool("helm"), "template", name, str(CHART), "-f", str(folder / "values.yaml")],
                              capture_output=True, text=True, check=True).stdout
    manifests = [m for m in yaml.safe_load_all(rendered) if m]
    secret = next(m for m in manifests if m["kind"] == "Secret")
    (folder / "secret.json").write_text(json.dumps(podman_secret(secret)))
    podman("secret", "create", secret["metadata"]["name"], str(folder / "secret.json"))
    released = Released(manifests, port, [])
    try:
        config = [m for m in manifests if m["kind"] == "ConfigMap"]
        play([*config, job_as_pod(released.kind("Job"))], folder, "migrate")
        released.pods.append(released.kind("Job")["metadata"]["name"])
        migrate = released.container("migrate")
        deadline = time.monotonic() + 180
        while podman("inspect", "--format", "{{.State.Status}}", migrate).stdout.strip() != "exited":
            assert time.monotonic() < deadline, podman("logs", migrate, check=False).stderr[-3000:]
            time.sleep(1)
        play([*config, *(m for m in manifests if m["kind"] == "Deployment")], folder, "deployments")
        released.pods += [f"{m['metadata']['name']}-pod-0" for m in manifests if m["kind"] == "Deployment"]
        yield released
    finally:
        for pod in released.pods:
            podman("pod", "rm", "-f", "-t", "10", pod, check=False)
        podman("secret", "rm", secret["metadata"]["name"], check=False)


def test_the_migration_jobs_command_succeeds(release):
    migrate = release.container("migrate")
    assert podman("inspect", "--format", "{{.State.ExitCode}}", migrate).stdout.strip() == "0", \
        podman("logs", migrate, check=False).stderr[-3000:]


def test_the_server_turns_ready_by_its_probes_and_serves_the_sdk(release):
    deadline = time.monotonic() + 180
    while probe(release.port, "") != "SERVING":
        assert time.monotonic() < deadline, podman("logs", release.container("server"), check=False).stderr[-3000:]
        time.sleep(1)
    assert probe(release.port, LIVENESS) == "SERVING"
    server = release.kind("Deployment", "server")["spec"]["template"]["spec"]["containers"][0]
    assert server["readinessProbe"]["grpc"]["port"] == release.port  # the probe run above is the chart's
    logs = podman("logs", release.container("server"), check=False)
    key = next(line.split()[-1] for line in (logs.stdout + logs.stderr).splitlines() if "tenant admin key:" in line)
    with MemoryClient(f"127.0.0.1:{release.port}", key) as client:
        stored = client.write_one("Releases go out through the chart's pods", kind="fact")
        assert stored.id in [h.memory.id for h in client.search("How do releases go out?", top_k=3).hits]


@pytest.mark.parametrize("component", ["server", "worker"])
def test_the_pods_run_with_the_charts_security_context(release, component):
    container = release.container(component)
    inspected = json.loads(podman("inspect", container).stdout)[0]
    assert inspected["State"]["Running"], podman("logs", container, check=False).stderr[-3000:]
    assert inspected["HostConfig"]["ReadonlyRootfs"] is True
    assert inspected["Config"]["User"].split(":")[0] == "10001"
    assert inspected["HostConfig"]["CapDrop"] and not inspected["HostConfig"].get("CapAdd")
    env = dict(e.split("=", 1) for e in inspected["Config"]["Env"])
    assert env["MEMPLANE_DATABASE_URL"] and env["MEMPLANE_MIGRATE_ON_START"] == "false"  # Secret and chart
    assert env["MEMPLANE_BOOTSTRAP_TENANT"] == "chart"  # the ConfigMap
