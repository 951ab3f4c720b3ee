"""What the sync and async watch() share: the request to (re)connect with and the position to
resume from, kept as responses are handed over."""
from __future__ import annotations

from typing import Any, Union

from . import _convert, _requests, types
from .v1 import memory_service_pb2 as svc_pb

WatchItem = Union[types.ChangeEvent, types.WatchProgress]


class WatchCursor:
    """The position everything up to which the caller has been handed, and the request that
    resumes after it (the first connection starts where the caller asked)."""

    def __init__(self, *, after_position: int | None, progress: bool, **filters: Any) -> None:
        self.request = _requests.watch(after_position=after_position, **filters)
        self.position = after_position
        self.progress = progress

    def next_request(self) -> svc_pb.WatchRequest:
        request = svc_pb.WatchRequest()
        request.CopyFrom(self.request)
        if self.position is not None:
            request.after_position = self.position
        return request

    def items(self, response: svc_pb.WatchResponse) -> list[tuple[int, WatchItem]]:
        """(position after the item, item) for each item to hand over."""
        out: list[tuple[int, WatchItem]] = [(e.position, _convert.change_event(e)) for e in response.events]
        if not response.events and self.progress:
            out.append((response.position, types.WatchProgress(response.position)))
        return out

    def finish(self, response: svc_pb.WatchResponse) -> None:
        """The whole response was handed over."""
        self.position = response.position
