"""Every use case, built once by the composition root (runtime.build_services) and handed to
the servicers, interceptors and background loops that need them."""
from __future__ import annotations

from dataclasses import dataclass

from .access.auth import Authenticator
from .access.availability import Availability
from .access.idempotency import Idempotency
from .access.rate_limits import RateLimits
from .access.read_routing import ReadRouting
from .admin import AdminService
from .conflicts import ConflictsService
from .content.admin import ContentPolicyService
from .forget.erasure import ErasureService
from .forget.lifecycle import LifecycleService
from .forget.service import ForgetService
from .memories import MemoriesService
from .metering import Metering
from .operations import OperationsService
from .reflection.consolidate import ConsolidateService
from .reflection.foresight import ForesightService
from .reflection.reflect import ReflectService
from .search.service import SearchService
from .usage import TokenUsage
from .watch.service import WatchService
from .working import WorkingService
from .write.context import ContextService
from .write.extract import ExtractService
from .write.intake import WriteIntake
from .write.service import WriteService


@dataclass(frozen=True)
class Services:
    writes: WriteService
    intake: WriteIntake
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
    content_policies: ContentPolicyService
    token_usage: TokenUsage
    metering: Metering
    auth: Authenticator
    idempotency: Idempotency
    rate_limits: RateLimits
    availability: Availability
    reads: ReadRouting
