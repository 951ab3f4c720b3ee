"""Use cases wired as the composition root wires them, over whatever deps a test built."""
from __future__ import annotations

from memplane_server.runtime import build_services
from memplane_server.services.deps import Deps
from memplane_server.services.forget.erasure import ErasureService
from memplane_server.services.forget.lifecycle import LifecycleService
from memplane_server.services.forget.service import ForgetService
from memplane_server.services.reflection.reflect import ReflectService
from memplane_server.services.write.intake import WriteIntake
from memplane_server.services.write.service import WriteService
from memplane_server.stores.postgres.forget.erasure import ErasureStore
from memplane_server.stores.postgres.forget.lifecycle import LifecycleStore
from memplane_server.worker.runner import JobRunner


def write_intake(deps: Deps) -> WriteIntake:
    """The entry of every Write (extraction and the after-write hooks around the write service)."""
    return build_services(deps, deps.memories.pool, deps.working.client).intake


def reflect_service(deps: Deps) -> ReflectService:
    return ReflectService(deps, WriteService(deps))


def job_runner(deps: Deps) -> JobRunner:
    return JobRunner(deps, build_services(deps, deps.memories.pool, deps.working.client))


def erasure_service(deps: Deps) -> ErasureService:
    return ErasureService(deps, ErasureStore(deps.memories.pool, deps.keys.users))


def lifecycle_service(deps: Deps) -> LifecycleService:
    return LifecycleService(deps, LifecycleStore(deps.memories.pool), ForgetService(deps))
