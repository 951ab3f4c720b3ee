"""Every use case, built once by the composition root (runtime.build_services) and handed to
the servicers, interceptors and background loops that need them."""
from __future__ import annotations

from dataclasses import dataclass

from .admin import AdminService
from .auth import Authenticator
from .availability import Availability
from .conflicts import ConflictsService
from .consolidate import ConsolidateService
from .context import ContextService
from .erasure import ErasureService
from .extract import ExtractService
from .forget import ForgetService
from .foresight import ForesightService
from .idempotency import Idempotency
from .lifecycle import LifecycleService
from .memories import MemoriesService
from .operations import OperationsService
from .rate_limits import RateLimits
from .read_routing import ReadRouting
from .reflect import ReflectService
from .search import SearchService
from .watch import WatchService
from .working import WorkingService
from .write import WriteService


@dataclass(frozen=True)
class Services:
    writes: WriteService
    extractions: ExtractService
    searches: SearchService
    foresight: ForesightService
    reflections: ReflectService
    forgets: ForgetService
    erasures: ErasureService
    memories: MemoriesService
    conflicts: ConflictsService
    consolidations: ConsolidateService
    working: WorkingService
    watches: WatchService
    operations: OperationsService
    contexts: ContextService
    admin: AdminService
    lifecycle: LifecycleService
    auth: Authenticator
    idempotency: Idempotency
    rate_limits: RateLimits
    availability: Availability
    reads: ReadRouting
