"""Erasure of a user: its reach, its receipt, and the subject that names the user without keeping it."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..access.caller import Caller, Role

ERASE_MODES = ("auto", "sync", "async")


def word_pattern(user_id: str) -> str:
    """A regular expression (Python's and PostgreSQL's alike) of user_id as a word of its own: not
    inside another id, word or address, so erasing "al" leaves "alice", "kal-el", "al@x.org" and
    "al.b" alone and redacts "asked by al." and {"user_id": "al"}."""
    return rf"(?<![\w@.-]){re.escape(user_id)}(?![\w@-]|\.\w)"


def redact_words(text: str, user_id: str) -> str:
    return re.sub(word_pattern(user_id), "[erased]", text)


def subject_of(tenant_id: str, user_id: str) -> str:
    """Hex sha256 of the tenant and user id: who can name the user can check a receipt, the
    receipt itself does not hold the id."""
    return hashlib.sha256(f"{tenant_id}\x00{user_id}".encode()).hexdigest()


def tenant_wide(caller: Caller) -> bool:
    """A tenant admin key erases across all its tenant's agents and scopes; any other writing key
    erases what it may change (Caller.can_write / stores.postgres.sql.writable), in its tenant."""
    return caller.role is Role.TENANT_ADMIN


@dataclass
class Receipt:
    """What an erasure removed where (rows and entries per table and store), never what they held."""

    operation_id: str
    erase_time: datetime
    subject: str
    counts: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def memories(self) -> int:
        return self.counts.get("postgres.memories", 0) + self.counts.get("postgres.derived_memories", 0)


def receipt_to_json(r: Receipt) -> dict[str, Any]:
    return {"operation_id": r.operation_id, "erase_time": r.erase_time.isoformat(), "subject": r.subject,
            "counts": dict(r.counts), "dry_run": r.dry_run}


def receipt_from_json(d: dict[str, Any]) -> Receipt:
    return Receipt(d["operation_id"], datetime.fromisoformat(d["erase_time"]), d["subject"],
                   {k: int(v) for k, v in d["counts"].items()}, bool(d.get("dry_run", False)))
