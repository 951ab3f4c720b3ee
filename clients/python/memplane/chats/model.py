"""What every export format is read into, and the error a bad file gets."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


class ChatFileError(Exception):
    """A file that cannot be imported; the message names the file and the line or record."""


@dataclass(frozen=True)
class ChatMessage:
    id: str  # unique in its conversation: what makes a re-run write it once
    speaker: str  # "user", "assistant", or a person's name
    text: str
    time: datetime | None = None
    user_id: str = ""  # whom the message is about, when the export says (Slack: its author)


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str = ""
    messages: list[ChatMessage] = field(default_factory=list)


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ChatFileError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except UnicodeDecodeError:
        raise ChatFileError(f"{path}: not UTF-8 text") from None


def from_epoch(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ChatFileError(f"{where}: the time {value!r} is not seconds since 1970")
    return datetime.fromtimestamp(float(value), tz=timezone.utc)


def from_iso(value: Any, where: str) -> datetime | None:
    if value in (None, ""):
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ChatFileError(f"{where}: the time {value!r} is not ISO 8601") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def text_of(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ChatFileError(f"{where}: the text is {type(value).__name__}, not a string")
    return value
