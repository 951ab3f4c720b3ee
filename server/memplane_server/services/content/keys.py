"""Tenants' data keys as the write path uses them, and the work that moves stored memories between
keys: rotating a tenant's data key (new writes take the new one; a pass re-seals the older rows,
readable under either key meanwhile) and re-wrapping every data key under the active KEK after a
KEK rotation. With no KEK configured, nothing is sealed.

Memories about a user are sealed under that user's key instead (stores/user_keys.py), where users'
keys are kept: a tenant's rotation leaves them be, and its re-seal moves memories about a user
still under the tenant's key (stored before users' keys were kept) to the user's key."""
from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass, field
from typing import Any

from ...stores.postgres.content.keys import TenantKeyStore
from ...stores.sealing import OPENERS, Texts, describe, is_user_key_ref, key_from_json, open_texts, seal
from ...stores.user_keys import Sealing, UserKeyFiles

RESEAL_BATCH = 200


@dataclass
class KeyStatus:
    """Where the stored memories stand: per KEK and per data key version, how many memories."""

    active_kek: str | None
    memories_by_kek: dict[str, int] = field(default_factory=dict)
    memories_in_clear: int = 0
    memories_under_user_keys: int = 0
    user_keys_by_kek: dict[str, int] = field(default_factory=dict)
    tenants_behind: list[str] = field(default_factory=list)  # with memories not under their current key


class TenantKeys:
    def __init__(self, store: TenantKeyStore, active_kek: str | None, cache_seconds: float = 60.0,
                 users: UserKeyFiles | None = None) -> None:
        self.store = store
        self.active_kek = active_kek
        self.users = users
        # A rotation made through another process reaches this one's writes within this time; what
        # they seal meanwhile under the older key stays pending a re-seal until it has passed.
        self.cache_seconds = cache_seconds
        self._current: dict[str, tuple[float, bytes]] = {}

    @property
    def enabled(self) -> bool:
        return self.active_kek is not None

    async def current(self, tenant_id: str) -> bytes | None:
        """The wrapped data key new writes of the tenant are sealed under (made on first use);
        None with encryption off."""
        if self.active_kek is None:
            return None
        cached = self._current.get(tenant_id)
        if cached is not None and time.monotonic() - cached[0] < self.cache_seconds:
            return cached[1]
        stored = await self.store.current(tenant_id)
        if stored is None:
            await self.store.add(tenant_id, 1, OPENERS.new_data_key(self.active_kek, tenant_id, 1))
            stored = await self.store.current(tenant_id)
            assert stored is not None
        self._current[tenant_id] = (time.monotonic(), stored[1])
        return stored[1]

    async def sealing(self, tenant_id: str) -> Sealing:
        """What a write of the tenant seals under: its current key, and its users' keys."""
        return Sealing(await self.current(tenant_id), self.users)

    def forget(self, tenant_id: str) -> None:
        self._current.pop(tenant_id, None)

    async def rotate(self, tenant_id: str) -> int:
        """A new data key for the tenant; returns its version. Rows move to it by reseal()."""
        if self.active_kek is None:
            raise RuntimeError("encryption is off: no key-encryption key is configured")
        stored = await self.store.current(tenant_id)
        version = (stored[0] if stored else 0) + 1
        await self.store.add(tenant_id, version, OPENERS.new_data_key(self.active_kek, tenant_id, version))
        self.forget(tenant_id)
        return version

    async def reseal(self, tenant_id: str) -> int:
        """Seals every memory and history snapshot of the tenant not under its current key (older
        keys, or stored in clear) under it; returns the memories moved. Resumable: it works in
        batches, each committed."""
        self.forget(tenant_id)
        current = await self.current(tenant_id)
        if current is None:
            return 0
        version = describe(current).version
        moved = 0
        sealing = Sealing(current, self.users)
        while True:
            rows = await self.store.stale_rows(tenant_id, current, RESEAL_BATCH, users=self.users is not None)
            if not rows:
                break
            users = await sealing.for_users(tenant_id, (row.user_id for row in rows))
            keys = [users.get(row.user_id or "", current) for row in rows]
            changes = [(row, key, seal(key, tenant_id, open_texts(row.sealed_key, tenant_id, row.texts)))
                       for row, key in zip(rows, keys)]
            changed = await self.store.reseal(changes)
            moved += changed
            if changed == 0:  # every row changed under us meanwhile: read them again
                await asyncio.sleep(0.05)
        await self._reseal_snapshots(tenant_id, current)
        for digest in await self.store.stale_digests(tenant_id, current):
            old_key, text = digest[4], digest[5]
            clear = OPENERS.open_text(old_key, tenant_id, "digest", text) if old_key else text
            await self.store.replace_digest(tenant_id, digest, current,
                                            OPENERS.seal_text(current, tenant_id, "digest", clear))
        await self.store.resealed(tenant_id, version, settled_seconds=self.cache_seconds)
        return moved

    async def upkeep(self, *, first_round: bool) -> int:
        """One round of the workers' key upkeep: data keys re-wrapped under the active KEK, then the
        tenants a rotation left behind re-sealed, and on a process's first round also those with
        memories stored in clear before encryption was on. Returns the memories moved."""
        moved = await self.rewrap_all()
        tenants = set(await self.store.pending_reseal())
        if first_round:
            tenants |= set(await self.store.tenants_in_clear(users=self.users is not None))
        for tenant_id in sorted(tenants):
            moved += await self.reseal(tenant_id)
        return moved

    async def _reseal_snapshots(self, tenant_id: str, current: bytes) -> None:
        sealing = Sealing(current, self.users)
        while True:
            snapshots = await self.store.stale_snapshots(tenant_id, current, RESEAL_BATCH, users=self.users is not None)
            if not snapshots:
                return
            users = await sealing.for_users(tenant_id, (s.get("user_id") for _, s in snapshots))
            await self.store.replace_snapshots(
                tenant_id, [(seq, _resealed(s, users.get(s.get("user_id") or "", current))) for seq, s in snapshots])

    async def rewrap_all(self) -> int:
        """Every data key not wrapped by the active KEK re-wrapped by it; returns the memories whose
        stored key changed (and the users' keys re-wrapped). Afterwards no stored data key needs an
        older KEK."""
        if self.active_kek is None:
            return 0
        moved = await asyncio.to_thread(self.users.rewrap) if self.users is not None else 0
        for tenant_id, version, wrapped in await self.store.all_keys():
            if describe(wrapped).kek_id != self.active_kek:
                new = OPENERS.rewrap(wrapped, tenant_id, self.active_kek)
                moved += await self.store.replace_wrapped(tenant_id, version, wrapped, new)
                self.forget(tenant_id)
        return moved

    async def status(self) -> KeyStatus:
        status = KeyStatus(self.active_kek)
        if self.users is not None:
            status.user_keys_by_kek = await asyncio.to_thread(self.users.kek_ids)
        current = {tenant: wrapped for tenant, _, wrapped in await self.store.all_keys()}  # the last is the highest
        for row in await self.store.counts():
            key = row["sealed_key"]
            if key is None:
                status.memories_in_clear += row["n"]
            elif is_user_key_ref(key):
                status.memories_under_user_keys += row["n"]
                continue
            else:
                kek = describe(key).kek_id
                status.memories_by_kek[kek] = status.memories_by_kek.get(kek, 0) + row["n"]
            if key != current.get(row["tenant_id"]) and row["tenant_id"] not in status.tenants_behind:
                status.tenants_behind.append(row["tenant_id"])
        return status


def _resealed(snapshot: dict[str, Any], current: bytes) -> dict[str, Any]:
    tenant = snapshot.get("tenant_id", "")
    old = snapshot.get("sealed_key")
    texts = Texts(snapshot.get("content", ""), snapshot.get("context", ""), snapshot.get("value"),
                  snapshot.get("metadata") or {})
    sealed = seal(current, tenant, open_texts(key_from_json(old), tenant, texts))
    return {**snapshot, "content": sealed.content, "context": sealed.context, "value": sealed.value,
            "metadata": sealed.metadata, "sealed_key": base64.b64encode(current).decode()}
