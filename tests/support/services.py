"""Use cases wired as the composition root wires them, over whatever deps a test built."""
from __future__ import annotations

from memplane_server.services.consolidate import ConsolidateService
from memplane_server.services.deps import Deps
from memplane_server.services.erasure import ErasureService
from memplane_server.services.extract import ExtractService
from memplane_server.services.forget import ForgetService
from memplane_server.services.lifecycle import LifecycleService
from memplane_server.services.reflect import ReflectService
from memplane_server.services.write import WriteService
from memplane_server.stores.postgres.erasure import ErasureStore
from memplane_server.stores.postgres.lifecycle import LifecycleStore
from memplane_server.worker.runner import JobRunner


def reflect_service(deps: Deps) -> ReflectService:
    return ReflectService(deps, WriteService(deps))


def job_runner(deps: Deps) -> JobRunner:
    writes = WriteService(deps)
    return JobRunner(deps, ReflectService(deps, writes), ExtractService(deps, writes), ConsolidateService(deps, writes),
                     erasure_service(deps), lifecycle_service(deps))


def erasure_service(deps: Deps) -> ErasureService:
    return ErasureService(deps, ErasureStore(deps.memories.pool))


def lifecycle_service(deps: Deps) -> LifecycleService:
    return LifecycleService(deps, LifecycleStore(deps.memories.pool), ForgetService(deps))
