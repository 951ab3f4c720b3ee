"""The change log behind Watch (migrations/0007_change_log.sql): reading it by position as a
caller, its head and pruning horizon, pruning, and the LISTEN connection that wakes readers."""
from __future__ import annotations

import asyncio
import logging

import asyncpg

from ...core.access.caller import Caller
from ...core.changes import ChangeEvent, ChangeFilter, ChangeKind, LogEntry
from ...core.model import Kind, Scope
from ...logs import OncePerCause, cause_of
from .session import caller_session
from .sql import Params, aware, record_from_json, visibility

log = logging.getLogger(__name__)

CHANNEL = "memplane_changes"
RECONNECT_SECONDS = 1.0


_HEAD = ("SELECT greatest((SELECT coalesce(max(position), 0) FROM memory_changes),"
         " (SELECT pruned_through FROM memory_change_state))")


class ChangeStore:
    def __init__(self, pool: asyncpg.Pool, standby: asyncpg.Pool | None = None) -> None:
        self.pool = pool
        self.standby = standby  # MEMPLANE_READ_DATABASE_URL: where pages are read when it has them
        self._standby_failures = OncePerCause(log)

    async def head(self) -> int:
        """The highest committed position (0 on an empty log). Every position below it is
        committed or will never be: positions are given out in commit order."""
        return int(await self.pool.fetchval(_HEAD))

    async def pruned_through(self) -> int:
        """Every change up to this position has been pruned."""
        return int(await self.pool.fetchval("SELECT pruned_through FROM memory_change_state"))

    async def read(
        self, caller: Caller, *, after: int, through: int, f: ChangeFilter, limit: int, max_bytes: int
    ) -> tuple[list[ChangeEvent], bool]:
        """The caller's visible changes in (after, through] matching f, oldest first: at most
        `limit`, and no more after their snapshots reach max_bytes (the first always comes).
        The flag says whether the range may hold more."""
        sql, values = read_statement(caller, after=after, through=through, f=f, limit=limit, max_bytes=max_bytes)
        rows = await self._read_on_standby(caller, through, sql, values)
        if rows is None:
            async with caller_session(self.pool, caller) as conn:
                rows = await conn.fetch(sql, *values)
        events = [
            ChangeEvent(
                position=r["position"], change=ChangeKind(r["change"]), action=r["action"], memory_id=r["memory_id"],
                scope=Scope(r["scope"]), kind=Kind(r["kind"]), session_id=r["session_id"], entity=r["entity"],
                changed_at=aware(r["changed_at"]),
                memory=record_from_json(r["snapshot"]) if r["snapshot"] else None,
            )
            for r in rows
        ]
        more = bool(rows) and (rows[0]["fetched"] >= limit or len(rows) < rows[0]["fetched"])
        return events, more

    async def _read_on_standby(self, caller: Caller, through: int, sql: str, values: list) -> list | None:
        """The page from the standby when it holds every position up to through, else None. Its own
        head at or past through says so: positions are given out in commit order, so every change
        at or below through committed before it, and replay only moves forward."""
        if self.standby is None:
            return None
        try:
            if int(await self.standby.fetchval(_HEAD)) < through:
                return None
            async with caller_session(self.standby, caller) as conn:
                return await conn.fetch(sql, *values)
        except Exception as exc:  # the standby is down: the primary answers
            self._standby_failures.log(cause_of(exc), "reading changes on the standby failed; reading the primary: %s",
                                       type(exc).__name__, level=logging.WARNING, exc_info=False)
            return None

    async def entries(self, after: int, through: int, limit: int) -> list[LogEntry]:
        """Every tenant's log entries in (after, through], oldest first, at most limit: what the
        process-wide feed reads once for all its watchers (as the owner; no content)."""
        rows = await self.pool.fetch(
            "SELECT position, tenant_id, change, scope, domain, agent_id, kind, session_id, entity FROM memory_changes"
            " WHERE position > $1 AND position <= $2 ORDER BY position LIMIT $3",
            after, through, limit,
        )
        return [LogEntry(r["position"], r["tenant_id"], ChangeKind(r["change"]), Scope(r["scope"]), r["domain"],
                         r["agent_id"], Kind(r["kind"]), r["session_id"], r["entity"]) for r in rows]

    async def prune(self, older_than_seconds: float, *, batch: int = 10_000) -> int:
        """Deletes changes older than the retention, oldest first (all tenants), and moves the
        pruning horizon past them; returns how many went."""
        total = 0
        while True:
            async with self.pool.acquire() as conn, conn.transaction():
                # The row lock makes concurrent sweeps of several servers take turns.
                pruned = await conn.fetchval("SELECT pruned_through FROM memory_change_state FOR UPDATE")
                cut = await conn.fetchval(
                    "SELECT max(position) FROM (SELECT position, changed_at FROM memory_changes"
                    " WHERE position > $1 ORDER BY position LIMIT $2) s"
                    " WHERE changed_at < now() - make_interval(secs => $3)",
                    pruned, batch, float(older_than_seconds),
                )
                if cut is None:
                    return total
                deleted = await conn.fetchval(
                    "WITH gone AS (DELETE FROM memory_changes WHERE position > $1 AND position <= $2 RETURNING 1)"
                    " SELECT count(*) FROM gone",
                    pruned, cut,
                )
                await conn.execute("UPDATE memory_change_state SET pruned_through = $1", cut)
            total += int(deleted)
            if deleted < batch:
                return total


def reach(caller: Caller, p: Params) -> str:
    """The log rows the caller can reach at all (implied by visibility), as the reach indexes of
    migration 0032 hold them: its tenant's, and those of the domains it reads."""
    parts = [f"m.tenant_id = {p.add(caller.tenant_id)}"]
    if caller.domains:
        parts.append(f"(m.domain = ANY({p.add(caller.readable_domains)}::text[]) AND m.domain IS NOT NULL)")
    return "(" + " OR ".join(parts) + ")"


def read_statement(caller: Caller, *, after: int, through: int, f: ChangeFilter, limit: int, max_bytes: int
                   ) -> tuple[str, list]:
    """The statement (and its parameters) behind ChangeStore.read, also for EXPLAIN."""
    # An entry's session and entity are its history row's snapshot's (gone with an erasure, which
    # leaves them nowhere), an 'erased' entry's its own (migration 0028).
    session = "coalesce(m.session_id, h.snapshot->>'session_id')"
    entity = "coalesce(m.entity, h.snapshot->>'entity')"
    p = Params()
    where = [f"m.position > {p.add(after)}", f"m.position <= {p.add(through)}", visibility(caller, p),
             reach(caller, p)]
    if f.scopes:
        where.append(f"m.scope = ANY({p.add([s.value for s in f.scopes])}::text[])")
    if f.kinds:
        where.append(f"m.kind = ANY({p.add([k.value for k in f.kinds])}::text[])")
    if f.change_kinds:
        where.append(f"m.change = ANY({p.add([c.value for c in f.change_kinds])}::text[])")
    if f.session_id:
        where.append(f"{session} = {p.add(f.session_id)}")
    if f.entity:
        where.append(f"{entity} = {p.add(f.entity)}")
    # Cut by size inside PostgreSQL, so no more than about max_bytes reaches this process.
    sql = (
        "SELECT * FROM (SELECT q.*, sum(q.size) OVER (ORDER BY q.position) AS running, count(*) OVER () AS fetched"
        f" FROM (SELECT m.position, m.change, m.action, m.memory_id, m.scope, m.kind, {session} AS session_id,"
        f" {entity} AS entity,"
        " m.changed_at, h.snapshot, coalesce(octet_length(h.snapshot::text), 0) AS size"
        " FROM memory_changes m LEFT JOIN memory_history h ON h.tenant_id = m.tenant_id AND h.seq = m.history_seq"
        f" WHERE {' AND '.join(where)} ORDER BY m.position LIMIT {p.add(limit)}) q) r"
        f" WHERE r.running - r.size < {p.add(max_bytes)} ORDER BY r.position"
    )
    return sql, p.values


class ChangeListener:
    """One LISTEN connection per process: every committed change, from any server, sets the
    current wake-up event. Readers also poll, so a lost connection only slows them down."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._event = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._failures = OncePerCause(log)

    def wakeup(self) -> asyncio.Event:
        """The event the next committed change sets; take it before reading the log."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen())
        return self._event

    def _wake(self, *_args) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def _listen(self) -> None:
        while True:
            conn = None
            try:
                conn = await asyncpg.connect(self.dsn)
                lost = asyncio.Event()
                conn.add_termination_listener(lambda _conn, lost=lost: lost.set())
                await conn.add_listener(CHANNEL, self._wake)
                self._wake()  # changes may have committed while no one listened
                while not lost.is_set() and not conn.is_closed():
                    try:
                        await asyncio.wait_for(lost.wait(), 5.0)
                    except asyncio.TimeoutError:
                        await conn.fetchval("SELECT 1")  # notices a dead server on an idle socket
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is down or restarting: readers poll meanwhile
                self._failures.log(cause_of(exc), "listening for changes failed; retrying", level=logging.WARNING,
                                   exc_info=False)
            finally:
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            await asyncio.sleep(RECONNECT_SECONDS)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
