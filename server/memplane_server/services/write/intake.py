"""The entry of every Write: the input stored first, then extraction when it is asked for (so a
model that fails loses nothing), then the after-write hooks (a session this write makes due for
reflection gets a reflect job: services/reflection/triggers.py). The composition root builds it
over the write and extraction services and wires the hooks: no service builds another, and the
write service knows nothing of extraction or reflection."""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ...core.access.caller import Caller
from ...core.access.requests import RequestKey
from ...core.model import MemoryDraft, MemoryRecord
from ...core.operations import Operation
from ...core.timezones import parse_time_zone
from ...core.write.outcomes import ItemOutcome
from .extract import ExtractService
from .service import WriteService

AfterWrite = Callable[[Caller, list[MemoryRecord]], Awaitable[None]]


@dataclass
class Accepted:
    """A Write's answer: the stored input with what became of each item, the memories extraction
    produced (sync only) and, when extraction runs in the background or failed and will be
    retried, its operation."""

    records: list[MemoryRecord]
    outcomes: list[ItemOutcome]
    extracted: list[MemoryRecord] = field(default_factory=list)
    operation: Operation | None = None
    extraction_degraded: str = ""  # why a sync extraction went without the model's answer


class WriteIntake:
    def __init__(self, writes: WriteService, extractions: ExtractService, after_write: Sequence[AfterWrite] = ()) -> None:
        self.writes, self.extractions, self.after_write = writes, extractions, tuple(after_write)

    async def accept(
        self, caller: Caller, drafts: list[MemoryDraft], infer: str | None, time_zone: str | None = None,
        request: RequestKey | None = None,
    ) -> Accepted:
        parse_time_zone(time_zone)  # refuse a bad zone before anything is stored
        if infer is not None:
            self.extractions.check(drafts)
        written = await self.writes.write_items(caller, drafts, request)
        records = [record for record, _ in written]
        accepted = Accepted(records, [outcome for _, outcome in written])
        if infer is not None:
            extracted, accepted.operation = await self.extractions.after_stored(caller, records, infer, time_zone)
            accepted.extracted, accepted.extraction_degraded = extracted.memories, extracted.degraded
        for hook in self.after_write:
            await hook(caller, records)
        return accepted
