"""deploy/helm/memplane rendered by a real helm (default values with the two required URLs, and a
file that turns every option on), linted, and every manifest validated offline against the
Kubernetes 1.37 schemas by kubernetes-validate."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.deploy.conftest import ROOT, run, tool

CHART = ROOT / "deploy/helm/memplane"
VALUE_FILES = {"minimal": CHART / "ci/minimal-values.yaml", "full": CHART / "ci/full-values.yaml"}
# Custom resources whose CRDs (prometheus-operator, Gateway API) have no schema in kubernetes-validate.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("gateway.networking.k8s.io/v1", "GRPCRoute")}
KUBERNETES = "1.37.0"


def render(*args: str) -> list[dict]:
    result = run(tool("helm"), "template", "mp", str(CHART), "--namespace", "agents", *args)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.fixture(scope="module", params=sorted(VALUE_FILES))
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render("-f", str(VALUE_FILES[request.param]))


def find(manifests: list[dict], kind: str, suffix: str = "") -> dict:
    [found] = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"].endswith(suffix)]
    return found


@pytest.mark.parametrize("values", sorted(VALUE_FILES))
def test_helm_lint_is_clean(values):
    result = run(tool("helm"), "lint", str(CHART), "--strict", "-f", str(VALUE_FILES[values]))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


def test_every_manifest_is_valid_kubernetes(rendered):
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    _, manifests = rendered
    for manifest in manifests:
        if (manifest["apiVersion"], manifest["kind"]) in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{manifest['kind']} {manifest['metadata']['name']}: {exc.message} at {list(exc.path)}")


def test_the_full_values_render_every_part(rendered):
    name, manifests = rendered
    kinds = {m["kind"] for m in manifests}
    always = {"ConfigMap", "ServiceAccount", "Service", "Deployment", "Job", "PodDisruptionBudget"}
    if name == "full":
        assert kinds == always | {"NetworkPolicy", "Ingress", "GRPCRoute", "ServiceMonitor"}
    else:
        assert kinds == always | {"Secret", "HorizontalPodAutoscaler"}


def test_default_values_without_a_database_refuse_to_render():
    result = run(tool("helm"), "template", "mp", str(CHART))
    assert result.returncode != 0
    assert "secrets.databaseUrl (or existingSecret) is required" in result.stderr


def test_the_schema_rejects_an_unknown_value():
    result = run(tool("helm"), "template", "mp", str(CHART), "-f", str(VALUE_FILES["minimal"]),
                 "--set", "server.replica=3")
    assert result.returncode != 0
    assert "replica" in result.stderr


def test_servers_are_probed_over_grpc_readiness_by_the_database_liveness_by_the_process(rendered):
    _, manifests = rendered
    [container] = find(manifests, "Deployment", "-server")["spec"]["template"]["spec"]["containers"]
    port = container["ports"][0]["containerPort"]
    assert container["readinessProbe"]["grpc"] == {"port": port}
    assert container["livenessProbe"]["grpc"] == {"port": port, "service": "liveness"}


def test_pods_run_as_non_root_on_a_read_only_root_filesystem(rendered):
    _, manifests = rendered
    for pod in (find(manifests, "Deployment", "-server"), find(manifests, "Deployment", "-worker"),
                find(manifests, "Job", "-migrate")):
        spec = pod["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        for container in spec["containers"]:
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            # Writable only where the server writes: its temp files, data dir and (a claim) users' keys.
            assert {m["mountPath"] for m in container["volumeMounts"]} - {"/var/lib/memplane-user-keys"} == {
                "/tmp", "/var/lib/memplane"}


def test_pods_spread_by_their_own_component(rendered):
    _, manifests = rendered
    for component in ("server", "worker"):
        spec = find(manifests, "Deployment", f"-{component}")["spec"]["template"]["spec"]
        selectors = {c["labelSelector"]["matchLabels"]["app.kubernetes.io/component"]
                     for c in spec["topologySpreadConstraints"]}
        assert selectors == {component}


def test_the_service_speaks_h2c(rendered):
    _, manifests = rendered
    [service] = [m for m in manifests if m["kind"] == "Service"
                 and m["metadata"]["labels"]["app.kubernetes.io/component"] == "server"]
    [grpc] = [p for p in service["spec"]["ports"] if p["name"] == "grpc"]
    assert grpc["appProtocol"] == "kubernetes.io/h2c"


def test_migrations_run_as_a_hook_after_what_they_read(rendered):
    _, manifests = rendered
    job = find(manifests, "Job", "-migrate")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]
    for kind in ("ConfigMap", "ServiceAccount", "Secret"):
        for manifest in (m for m in manifests if m["kind"] == kind):
            annotations = manifest["metadata"]["annotations"]
            assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
            assert int(annotations["helm.sh/hook-weight"]) < int(job["metadata"]["annotations"]["helm.sh/hook-weight"])


def test_an_existing_secret_replaces_the_charts_own():
    manifests = render("-f", str(VALUE_FILES["full"]))
    assert not [m for m in manifests if m["kind"] == "Secret"]
    env_from = find(manifests, "Deployment", "-server")["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert {"secretRef": {"name": "memplane-credentials"}} in env_from


@pytest.mark.parametrize(("workers", "background"), [("true", "none"), ("false", "in-process")])
def test_servers_leave_background_work_to_worker_pods_when_there_are_any(workers, background):
    manifests = render("-f", str(VALUE_FILES["minimal"]), "--set", f"worker.enabled={workers}")
    assert find(manifests, "ConfigMap")["data"]["MEMPLANE_BACKGROUND_WORK"] == background
    assert bool([m for m in manifests if m["metadata"]["name"].endswith("-worker")]) == (workers == "true")


def test_every_value_is_described_by_the_schema():
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    undescribed = []

    def walk(value, node, path):
        if not isinstance(value, dict) or "properties" not in node:
            if "description" not in node:
                undescribed.append(path)
            return
        for key, child in value.items():
            assert key in node["properties"], f"{path}.{key} is not in values.schema.json"
            walk(child, node["properties"][key], f"{path}.{key}")

    walk(values, schema, "")
    assert not undescribed, undescribed


@pytest.mark.parametrize(("hook", "on_start"), [("true", "false"), ("false", "true")])
def test_pods_migrate_at_start_only_without_the_migration_job(hook, on_start):
    manifests = render("-f", str(VALUE_FILES["minimal"]), "--set", f"migrations.enabled={hook}")
    assert find(manifests, "ConfigMap")["data"]["MEMPLANE_MIGRATE_ON_START"] == on_start
    assert bool([m for m in manifests if m["kind"] == "Job"]) == (hook == "true")


def test_a_migration_url_reaches_the_migration_job_through_the_charts_secret():
    direct = "postgresql://memplane:secret@postgres-direct.db.svc:5432/memplane"
    manifests = render("-f", str(VALUE_FILES["minimal"]), "--set", f"secrets.migrationDatabaseUrl={direct}")
    secret = find(manifests, "Secret")
    assert secret["stringData"]["MEMPLANE_MIGRATION_DATABASE_URL"] == direct
    env_from = find(manifests, "Job", "-migrate")["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert {"secretRef": {"name": secret["metadata"]["name"]}} in env_from
    assert "MEMPLANE_MIGRATION_DATABASE_URL" not in find(
        render("-f", str(VALUE_FILES["minimal"])), "Secret")["stringData"]


def test_users_keys_are_one_claim_mounted_by_every_server_and_worker_and_named_in_the_settings():
    manifests = render("-f", str(VALUE_FILES["minimal"]), "--set", "userKeys.existingClaim=shared-keys")
    assert find(manifests, "ConfigMap")["data"]["MEMPLANE_USER_KEYS_DIR"] == "/var/lib/memplane-user-keys"
    for suffix in ("-server", "-worker"):
        pod = find(manifests, "Deployment", suffix)["spec"]["template"]["spec"]
        assert {"name": "user-keys", "persistentVolumeClaim": {"claimName": "shared-keys"}} in pod["volumes"]
        assert {"name": "user-keys", "mountPath": "/var/lib/memplane-user-keys"} in pod["containers"][0]["volumeMounts"]
    assert "MEMPLANE_USER_KEYS_DIR" not in find(render("-f", str(VALUE_FILES["minimal"])), "ConfigMap")["data"]


def test_encryption_keys_reach_the_pods_through_the_charts_secret_and_a_malformed_one_is_refused():
    keys = "k1:" + "A" * 43 + "="
    manifests = render("-f", str(VALUE_FILES["minimal"]), "--set", f"secrets.encryptionKeys={keys}")
    assert find(manifests, "Secret")["stringData"]["MEMPLANE_ENCRYPTION_KEYS"] == keys
    refused = run(tool("helm"), "template", "mp", str(CHART), "-f", str(VALUE_FILES["minimal"]),
                  "--set", "secrets.encryptionKeys=no colon here")
    assert refused.returncode != 0 and "encryptionKeys" in refused.stderr
