"""The composition root: settings -> embedded services -> pools -> use cases -> gRPC server."""
from __future__ import annotations

import asyncio
import gc
import logging
import signal
from dataclasses import dataclass
from functools import partial
from typing import cast

import asyncpg
import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from .api.drain import Drain
from .api.server import build_server, set_serving, watch_database
from .core.metering import UsageTally
from .embedded import EmbeddedPostgres, EmbeddedRedis
from .embedded._process import write_private_file
from .embedded.guardian import Guardian
from .embedded.model import LITELLM_MODEL, EmbeddedModel
from .embedded.supervisor import Supervisor
from .key_setup import (
    check_user_key_store,
    install_user_keys,
    key_encryption_keys,
    refuse_missing_keks,
    refuse_unswept_restore,
    user_key_files,
)
from .llm.chat import ChatModel
from .llm.embedders import background_threads, create_embedder
from .llm.ledger import TokenLedger
from .llm.routing import Endpoint
from .llm.structured import OutputForm
from .services.access.auth import Authenticator
from .services.access.availability import Availability
from .services.access.idempotency import Idempotency
from .services.access.rate_limits import RateLimits
from .services.access.read_routing import ReadRouting
from .services.admin import AdminService
from .services.conflicts import ConflictsDeps, ConflictsService
from .services.content.admin import ContentPolicyDeps, ContentPolicyService
from .services.content.keys import TenantKeys
from .services.content.policies import ContentPolicies
from .services.deps import Deps, narrowed
from .services.forget.deps import ForgetDeps
from .services.forget.erasure import ErasureService
from .services.forget.lifecycle import LifecycleService
from .services.forget.service import ForgetService
from .services.memories import MemoriesDeps, MemoriesService
from .services.metering import Metering
from .services.operations import OperationsDeps, OperationsService
from .services.reflection.consolidate import ConsolidateService
from .services.reflection.deps import ReflectionDeps
from .services.reflection.foresight import ForesightService
from .services.reflection.reflect import ReflectService
from .services.reflection.triggers import after_write
from .services.registry import Services
from .services.search.deps import SearchDeps
from .services.search.service import SearchService
from .services.usage import TokenUsage
from .services.watch.deps import WatchDeps
from .services.watch.service import WatchService
from .services.working import WorkingDeps, WorkingService
from .services.write.context import ContextService
from .services.write.deps import WriteDeps
from .services.write.digests import DigestService
from .services.write.extract import ExtractService
from .services.write.intake import WriteIntake
from .services.write.service import WriteService
from .settings import Settings
from .stores.postgres.changes import ChangeListener, ChangeStore
from .stores.postgres.conflicts import ConflictStore
from .stores.postgres.content.keys import TenantKeyStore
from .stores.postgres.content.policies import ContentPolicyStore
from .stores.postgres.contexts import ContextStore
from .stores.postgres.decisions import DecisionStore
from .stores.postgres.forget.erasure import ErasureStore
from .stores.postgres.forget.lifecycle import LifecycleStore
from .stores.postgres.jobs import JobStore
from .stores.postgres.memories import MemoryStore
from .stores.postgres.migrations import applied_version, latest_version, migrate
from .stores.postgres.pool import VECTOR_DIM, create_pool, database_ping
from .stores.postgres.replica import ReadPools
from .stores.postgres.search.digests import DigestStore
from .stores.postgres.search.entities import EntityStore
from .stores.postgres.search.feedback import FeedbackStore
from .stores.postgres.search.keyword_stats import KeywordStatsStore
from .stores.postgres.search.planner_stats import PlannerStatsStore
from .stores.postgres.tenancy import TenancyStore
from .stores.postgres.usage import MeteringStore, TokenUsageStore
from .stores.redis.client import connect as connect_redis
from .stores.redis.idempotency import IdempotencyStore
from .stores.redis.rate_limit import RateLimiter
from .stores.redis.working import WorkingStore
from .stores.sealing import OPENERS
from .telemetry import setup_telemetry
from .worker.loops import (
    build_turn_windows,
    keep_keyword_stats,
    maintain_keys,
    report_backlogs,
    roll_up_usage,
    schedule_consolidations,
    schedule_lifecycle,
    sweep_expired,
    upgrade_turn_windows,
)
from .worker.runner import JobRunner

log = logging.getLogger(__name__)
REDIS_TIMEOUT_SECONDS = 2.0
POOL_CLOSE_SECONDS = 1.0
# How long gRPC gets to finish the calls it has taken in but no handler has counted yet (they are
# refused UNAVAILABLE, so clients retry elsewhere), or, after the grace time, those still running.
# Zero would cancel the refusals on their way out: a client sees CANCELLED, which the SDK retries
# only for calls safe to repeat and other clients may not retry at all.
SERVER_STOP_SECONDS = 0.5


# Where a serving process leaves its embedded database's address for `memplane` tools (0600).
RUNNING_DSN_FILE = "postgres.url"


@dataclass
class Embedded:
    """Embedded PostgreSQL and Redis, started only for what is not configured, and the local
    model when MEMPLANE_LOCAL_MODEL names one.

    Between start() and stop() a supervisor thread restarts them when they die (same
    URLs), and a guardian process stops them if this process dies without stop().
    """

    settings: Settings
    postgres: EmbeddedPostgres | None = None
    redis: EmbeddedRedis | None = None
    model: EmbeddedModel | None = None
    database_url: str = ""
    redis_url: str = ""
    guardian: Guardian | None = None
    supervisor: Supervisor | None = None

    def start(self) -> None:
        s = self.settings
        self.database_url, self.redis_url = s.database_url or "", s.redis_url or ""
        if not s.database_url:
            self.postgres = EmbeddedPostgres(s.data_dir)
        if not s.redis_url:
            self.redis = EmbeddedRedis(s.data_dir)
        if s.local_model:
            self.model = EmbeddedModel(s.data_dir, s.local_model, s.local_model_threads)
        children = [c for c in (self.postgres, self.redis, self.model) if c is not None]
        if not children:
            return
        # Guarded before they start: a kill during a slow first start must leave nothing running.
        self.guardian = Guardian(s.data_dir, children)
        self.guardian.start()
        if self.postgres is not None:
            self.database_url = self.postgres.start()
            write_private_file(s.data_dir / RUNNING_DSN_FILE, self.database_url + "\n")
        if self.redis is not None:
            self.redis_url = self.redis.start()
        if self.model is not None:
            self.model.start()
        self.supervisor = Supervisor(children)
        self.supervisor.start()

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop()
        if self.postgres is not None:
            (self.settings.data_dir / RUNNING_DSN_FILE).unlink(missing_ok=True)
        for child in (self.model, self.redis, self.postgres):
            if child is not None:
                try:
                    child.stop()
                except Exception:
                    log.exception("stopping embedded %s failed", type(child).__name__)
        if self.guardian is not None:
            # Last: it stops whatever the stops above left running.
            self.guardian.stop()


    def local_endpoint(self) -> Endpoint | None:
        """The local model it started, the default model of the LLM stages then (those of
        MEMPLANE_LLM_STAGE_MODELS and the fallbacks stay at MEMPLANE_LLM_API_BASE)."""
        if self.model is None or self.model.api_base is None:
            return None
        return Endpoint(LITELLM_MODEL, self.model.api_base, self.model.api_key, "json_object_schema")


def chat_model(s: Settings, local: Endpoint | None, ledger: TokenLedger | None) -> ChatModel | None:
    """The stages' models: the default (the local one, else MEMPLANE_LLM_MODEL) or the stage's own,
    then the fallbacks; None when no model is set."""
    def provider(model: str) -> Endpoint:
        return Endpoint(model, s.llm_api_base, s.llm_api_key, cast(OutputForm, s.llm_structured_output))

    default = local or (provider(s.llm_model) if s.llm_model else None)
    if default is None:
        return None
    return ChatModel(default.model, api_base=default.api_base, api_key=default.api_key, timeout=s.llm_timeout_seconds,
                     structured_output=default.form,
                     stages={stage: provider(model) for stage, model in s.stage_models.items()},
                     fallbacks=tuple(provider(model) for model in s.fallback_models), ledger=ledger)


async def prepare_schema(settings: Settings, database_url: str) -> None:
    """Migrates at start (through MEMPLANE_MIGRATION_DATABASE_URL when set), or, when
    MEMPLANE_MIGRATE_ON_START is false, refuses a database this release's migrations have not all
    reached: a process that waited instead would hide a migration Job that never ran."""
    if settings.migrate_on_start:
        conn = await asyncpg.connect(settings.migration_database_url or database_url)
        try:
            await migrate(conn)
        finally:
            await conn.close()
        return
    conn = await asyncpg.connect(database_url)
    try:
        version = await applied_version(conn)
    finally:
        await conn.close()
    if version < latest_version():
        raise SystemExit(
            f"the database schema is at version {version}, this release needs {latest_version()}, and "
            "MEMPLANE_MIGRATE_ON_START=false: run `memplane migrate` first (the Helm chart's migration Job, "
            "docker compose's migrate service)")


@dataclass
class Runtime:
    settings: Settings
    database_url: str
    redis_url: str
    pool: asyncpg.Pool | None = None
    standby_pool: asyncpg.Pool | None = None
    redis_client: redis.Redis | None = None
    deps: Deps | None = None
    local_model: Endpoint | None = None

    async def open(self) -> Deps:
        s = self.settings
        # Before the pool: its connections need the vector type to exist.
        await prepare_schema(s, self.database_url)
        self.pool = await create_pool(self.database_url, size=s.db_pool_size, ef_search=s.hnsw_ef_search,
                                      pooled=s.database_pooled)
        await refuse_unswept_restore(self.pool)
        if s.read_database_url:
            self.standby_pool = await create_pool(s.read_database_url, size=s.db_pool_size, ef_search=s.hnsw_ef_search,
                                                  pooled=s.database_pooled)
        # Bounded waits: a Redis that hangs must turn into UNAVAILABLE, not a call that never ends.
        # One quick retry replaces a pooled connection that a Redis restart broke; redis-py's
        # default (three with backoff) made every call wait 3 s while Redis was down.
        self.redis_client = connect_redis(
            self.redis_url, timeout=REDIS_TIMEOUT_SECONDS, retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), 1))
        await self.redis_client.ping()
        tally = UsageTally()
        embedder = create_embedder(
            s.embedding_model, dim=VECTOR_DIM, threads=s.embed_threads, batch_size=s.embed_batch_size,
            api_base=s.llm_api_base, api_key=s.llm_api_key, timeout=s.llm_timeout_seconds,
            background_threads=background_threads(s.background_embed_threads),
            one_thread_bytes=s.embed_query_one_thread_bytes, passage_nice=s.embed_passage_nice,
            tally=tally if s.usage_metering else None,
        )
        if embedder.dim != VECTOR_DIM:
            raise SystemExit(f"embedding model {s.embedding_model} gives {embedder.dim}-d vectors; the schema stores {VECTOR_DIM}")
        usage = TokenUsage(TokenUsageStore(self.pool), TenancyStore(self.pool), s.llm_daily_token_budget)
        model = chat_model(s, self.local_model, usage)
        keks = key_encryption_keys(s, embedded=not s.database_url)
        OPENERS.add(keks)
        await refuse_missing_keks(TenantKeyStore(self.pool), {k.id for k in keks})
        users = user_key_files(s, keks, embedded=not s.database_url)
        await check_user_key_store(self.pool, users)
        install_user_keys(s, users)
        self.deps = Deps(
            settings=s, memories=MemoryStore(
                self.pool, default_max_memories=s.max_memories_per_tenant, walk_min_memories=s.search_walk_min_memories,
                reads=ReadPools(self.pool, self.standby_pool)),
            tenancy=TenancyStore(self.pool), jobs=JobStore(self.pool),
            contexts=ContextStore(self.pool), conflicts=ConflictStore(self.pool),
            decisions=DecisionStore(self.pool),
            keyword_stats=KeywordStatsStore(self.pool), planner_stats=PlannerStatsStore(self.pool),
            feedback=FeedbackStore(self.pool),
            entities=EntityStore(self.pool), digests=DigestStore(self.pool),
            working=WorkingStore(self.redis_client, s.working_max_items), embedder=embedder, llm=model,
            changes=ChangeStore(self.pool, self.standby_pool), change_listener=ChangeListener(s.migration_database_url or self.database_url),
            content=ContentPolicies(ContentPolicyStore(self.pool), s.content_policy_cache_seconds),
            keys=TenantKeys(TenantKeyStore(self.pool), keks[0].id if keks else None, s.key_cache_seconds, users),
            idempotency=IdempotencyStore(self.redis_client, s.idempotency_ttl_seconds), tally=tally,
        )
        return self.deps

    async def close(self) -> None:
        if self.deps is not None:
            self.deps.embedder.close()
            self.deps.cpu.close()
            await self.deps.change_listener.close()
        if self.redis_client is not None:
            await self.redis_client.aclose()
        for pool in (self.standby_pool, self.pool):
            if pool is None:
                continue
            try:
                await asyncio.wait_for(pool.close(), POOL_CLOSE_SECONDS)
            except asyncio.TimeoutError:  # a connection stuck on a dead server: do not wait for it
                pool.terminate()


def build_services(deps: Deps, pool: asyncpg.Pool, redis_client: redis.Redis) -> Services:
    """Every use case, once; those that write through another get that one."""
    s = deps.settings
    write_deps, forget_deps, reflection_deps = (narrowed(WriteDeps, deps), narrowed(ForgetDeps, deps),
                                                narrowed(ReflectionDeps, deps))
    writes = WriteService(write_deps)
    extractions = ExtractService(write_deps, writes)
    searches = SearchService(narrowed(SearchDeps, deps))
    forgets = ForgetService(forget_deps)
    return Services(
        writes=writes,
        intake=WriteIntake(writes, extractions, after_write=[partial(after_write, reflection_deps)]),
        extractions=extractions,
        searches=searches,
        foresight=ForesightService(searches),
        reflections=ReflectService(reflection_deps, writes),
        forgets=forgets,
        erasures=ErasureService(forget_deps, ErasureStore(pool, deps.keys.users)),
        memories=MemoriesService(narrowed(MemoriesDeps, deps)),
        conflicts=ConflictsService(narrowed(ConflictsDeps, deps)),
        consolidations=ConsolidateService(reflection_deps, writes),
        working=WorkingService(narrowed(WorkingDeps, deps), writes),
        watches=WatchService(narrowed(WatchDeps, deps)),
        operations=OperationsService(narrowed(OperationsDeps, deps)),
        contexts=ContextService(write_deps, quiet_seconds=s.context_quiet_seconds, digests=DigestService(write_deps)),
        admin=AdminService(deps.tenancy),
        lifecycle=LifecycleService(forget_deps, LifecycleStore(pool), forgets),
        content_policies=ContentPolicyService(narrowed(ContentPolicyDeps, deps)),
        token_usage=TokenUsage(TokenUsageStore(pool), deps.tenancy, s.llm_daily_token_budget),
        metering=Metering(MeteringStore(pool), deps.tenancy, deps.tally),
        auth=Authenticator(deps.tenancy),
        idempotency=Idempotency(deps.idempotency or IdempotencyStore(redis_client, s.idempotency_ttl_seconds),
                                deps.keys),
        rate_limits=RateLimits(RateLimiter(redis_client, per_second=s.rate_limit_per_second,
                                           burst=s.rate_limit_burst),
                               failures=RateLimiter(redis_client, per_second=s.auth_failures_per_second,
                                                    burst=s.auth_failures_burst)),
        availability=Availability(database_ping(pool)),
        reads=ReadRouting(deps.memories.reads, s.read_wait_ms),
    )


def start_background(deps: Deps, services: Services) -> tuple[list[JobRunner], list[asyncio.Task]]:
    """One process's share of the background work: job runners, the expiry sweep, the turn-window
    builder and upgrader, the backlog gauges, the keyword statistics and the consolidation and
    lifecycle schedules. Each claims what it does (jobs by SKIP LOCKED, window builds by lease, a
    tenant's keyword count by an advisory lock, expired sessions by ZREM; pruning old request
    records is an idempotent DELETE), so any number of servers and workers do each piece once.
    """
    s = deps.settings
    runners = [JobRunner(deps, services) for _ in range(s.workers)]
    tasks = [asyncio.create_task(r.run_forever()) for r in runners]
    if runners:
        tasks.append(asyncio.create_task(
            sweep_expired(services.working, services.writes, services.watches, s.working_sweep_seconds, runners[0])))
    if runners and s.context_window:
        tasks.append(asyncio.create_task(build_turn_windows(services.contexts, runners[0])))
        if s.context_vectors == "embed":
            tasks.append(asyncio.create_task(upgrade_turn_windows(services.contexts, runners[0])))
    if runners:
        tasks.append(asyncio.create_task(report_backlogs(deps, runners[0])))
        tasks.append(asyncio.create_task(keep_keyword_stats(deps, s.keyword_stats_seconds, runners[0])))
    if runners and s.consolidate_every_seconds:
        tasks.append(asyncio.create_task(schedule_consolidations(deps, s.consolidate_every_seconds, runners[0])))
    if runners and s.lifecycle_every_seconds:
        tasks.append(asyncio.create_task(schedule_lifecycle(deps, s.lifecycle_every_seconds, runners[0])))
    if runners and s.key_maintenance_seconds:
        tasks.append(asyncio.create_task(maintain_keys(deps, s.key_maintenance_seconds, runners[0])))
    if runners and s.usage_metering and s.usage_rollup_seconds:
        tasks.append(asyncio.create_task(roll_up_usage(services.metering, s.usage_rollup_seconds, runners[0])))
    return runners, tasks


def _freeze_startup_objects() -> None:
    """What startup made (modules, the model, litellm's tables: ~400,000 objects) lives as long as
    the process. Frozen, the collector's full passes no longer walk it: each took 50-200 ms with the
    GIL held, stalling every call whenever a request allocated thousands of objects."""
    gc.collect()
    gc.freeze()


def _stop_signal() -> asyncio.Event:
    """Set on the first SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _finish(tasks: list[asyncio.Task], deadline: float) -> None:
    """Waits for the background tasks until the deadline, then cancels the late ones."""
    if not tasks:
        return
    _, late = await asyncio.wait(tasks, timeout=max(0.0, deadline - asyncio.get_running_loop().time()))
    for task in late:  # a job or a window build still running: its lease brings it back later
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def work(settings: Settings) -> None:
    """`memplane worker`: the background work alone, no gRPC, until SIGTERM/SIGINT; then the loops
    stop at their next safe point within the grace time and pools close."""
    setup_telemetry(settings.telemetry_exporter, otlp_endpoint=settings.otlp_endpoint,
                    metrics_listen=settings.metrics_listen)
    runtime = Runtime(settings, settings.database_url or "", settings.redis_url or "")
    deps = await runtime.open()
    services = build_services(deps, runtime.pool, runtime.redis_client)
    runners, tasks = start_background(deps, services)
    flusher = asyncio.create_task(services.metering.flush_every(settings.usage_flush_seconds))
    _freeze_startup_objects()
    stop = _stop_signal()
    print(f"memplane worker running {len(runners)} job runners", flush=True)
    await stop.wait()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.shutdown_grace_seconds
    log.info("shutting down: finishing background work for up to %.0fs", settings.shutdown_grace_seconds)
    for r in runners:
        r.stop()
    await _finish(tasks, deadline)
    flusher.cancel()
    await _finish([asyncio.ensure_future(services.metering.flush())], deadline)
    await runtime.close()


async def serve(settings: Settings, database_url: str, redis_url: str, *, ready: asyncio.Event | None = None,
                local_model: Endpoint | None = None) -> None:
    """Serves until SIGTERM/SIGINT, then drains within the grace time: NOT_SERVING at once, new
    calls UNAVAILABLE, in-flight calls finish (or are cancelled at the deadline), background loops
    stop at a safe point, pools close."""
    setup_telemetry(settings.telemetry_exporter, otlp_endpoint=settings.otlp_endpoint,
                    metrics_listen=settings.metrics_listen)
    runtime = Runtime(settings, database_url, redis_url, local_model=local_model)
    deps = await runtime.open()
    services = build_services(deps, runtime.pool, runtime.redis_client)
    bootstrap = await services.admin.bootstrap(settings.bootstrap_tenant) if settings.bootstrap_tenant else None
    drain = Drain()
    server, health_servicer = build_server(services, drain, traced=settings.telemetry_exporter != "none",
                                           metered=settings.usage_metering)
    port = server.add_insecure_port(settings.listen)
    if port == 0:
        raise SystemExit(f"cannot listen on {settings.listen}")
    runners, tasks = start_background(deps, services) if settings.background_work == "in-process" else ([], [])
    _freeze_startup_objects()
    await server.start()
    await set_serving(health_servicer, True)
    tasks.append(asyncio.create_task(watch_database(services.availability, health_servicer, drain)))
    flusher = asyncio.create_task(services.metering.flush_every(settings.usage_flush_seconds))
    host = settings.listen.rsplit(":", 1)[0]
    print(f"memplane listening on {host}:{port}", flush=True)
    if bootstrap:
        platform_secret, tenant_secret = bootstrap
        print(
            f"created tenant '{settings.bootstrap_tenant}'. These keys are shown once; store them now:\n"
            f"  tenant admin key:   {tenant_secret}\n  platform admin key: {platform_secret}",
            flush=True,
        )
    stop = _stop_signal()
    if ready is not None:
        ready.set()
    await stop.wait()
    loop = asyncio.get_running_loop()
    grace = settings.shutdown_grace_seconds
    deadline = loop.time() + grace
    log.info("shutting down: draining for up to %.0fs", grace)
    # Load balancers see NOT_SERVING while the calls in flight finish; the server still answers.
    await set_serving(health_servicer, False)
    for r in runners:
        r.stop()
    if not await drain.wait_idle(grace):
        log.warning("grace time over with %d calls in flight: cancelling them", drain.in_flight)
    await server.stop(SERVER_STOP_SECONDS)
    flusher.cancel()  # and what it counted is written once more below, the calls all done
    await _finish([*tasks, asyncio.ensure_future(services.searches.usage.flush()),
                   asyncio.ensure_future(services.metering.flush())], deadline)
    await runtime.close()
