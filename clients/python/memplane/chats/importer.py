"""Conversations written as sessions of turns through the Python SDK, each message once.

A message's source id (its conversation's and its own id) is what makes it once: before writing a
conversation the importer lists the turns its session holds and leaves out the messages already
there, so a second run writes nothing and a run cut short, run again, writes the rest. Each batch
carries a request id made from what it holds, so a batch retried across a server restart within
the idempotency window (MEMPLANE_IDEMPOTENCY_TTL_SECONDS) is applied once too.
"""
from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model import ChatMessage, Conversation

if TYPE_CHECKING:
    from memplane import MemoryClient

MAX_ID_BYTES = 256  # the server's limit on session and source ids
REQUEST_IDS = uuid.UUID("6d656d70-6c61-6e65-2d63-686174732d31")  # the namespace of batches' request ids


@dataclass
class ImportReport:
    conversations: int = 0
    messages: int = 0
    written: int = 0  # on a dry run: would be written
    already: int = 0  # imported by an earlier run


def bounded(text: str) -> str:
    """An id within the server's limit: itself, or its prefix and a hash of the whole."""
    if len(text.encode()) <= MAX_ID_BYTES:
        return text
    return text.encode()[:MAX_ID_BYTES - 33].decode(errors="ignore") + "~" + hashlib.sha256(text.encode()).hexdigest()[:32]


def parts(message: ChatMessage, max_bytes: int) -> Iterator[tuple[str, str]]:
    """(source suffix, text) pieces of at most max_bytes: a long answer becomes several turns,
    never a refused write halfway through an import. NUL, which no text may hold, is dropped."""
    data = message.text.replace("\0", "").encode()
    if len(data) <= max_bytes:
        yield "", data.decode()
        return
    pieces, start = [], 0
    while start < len(data):
        end = min(start + max_bytes, len(data))
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # not inside a UTF-8 character
            end -= 1
        pieces.append(data[start:end].decode())
        start = end
    yield from ((f"#{n}", piece) for n, piece in enumerate(pieces, start=1))


def import_chats(client: MemoryClient, source: str, conversations: list[Conversation], *, user_id: str = "",
                 dry_run: bool = False, batch: int = 64, max_bytes: int = 16 * 1024,
                 progress: Callable[[ImportReport], None] = lambda report: None) -> ImportReport:
    from memplane import MemoryInput

    report = ImportReport(conversations=len(conversations), messages=sum(len(c.messages) for c in conversations))
    for conversation in conversations:
        session = bounded(f"{source}:{conversation.id}")
        present = {m.source_id for m in client.iter_memories(session_id=session, kinds="turn", page_size=200)}
        todo = []
        for message in conversation.messages:
            pieces = [(bounded(f"{conversation.id}:{message.id}{suffix}"), text)
                      for suffix, text in parts(message, max_bytes - len(message.speaker.encode()) - 2)]
            if all(key in present for key, _ in pieces):
                report.already += 1
                continue
            todo += [MemoryInput(f"{message.speaker}: {text}", kind="turn", session_id=session,
                                 user_id=message.user_id or user_id, occurred_at=message.time,
                                 source_type=f"chat-import:{source}", source_id=key,
                                 metadata={"speaker": message.speaker, "conversation": conversation.title})
                     for key, text in pieces if key not in present]
            report.written += 1
        for start in range(0, len(todo), batch):
            chunk = todo[start:start + batch]
            if not dry_run:
                keys = "\n".join(item.source_id for item in chunk)
                client.write(chunk, request_id=str(uuid.uuid5(REQUEST_IDS, f"{session}\n{keys}")))
        progress(report)
    return report
