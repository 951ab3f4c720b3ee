"""The export formats: each reads a whole file (or Slack's folder or zip) into conversations, or
raises ChatFileError naming the record, before anything is written."""
from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from .model import ChatFileError, ChatMessage, Conversation, from_epoch, from_iso, load_json, text_of


def _records(data: Any, path: Path) -> list[dict[str, Any]]:
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ChatFileError(f"{path}: expected a list of conversations (objects)")
    return data


def chatgpt(path: Path) -> list[Conversation]:
    """ChatGPT's conversations.json: each conversation a tree of messages (`mapping`); the branch
    that ends at `current_node` is what the user saw, the others are edits and regenerations."""
    out = []
    for n, record in enumerate(_records(load_json(path), path)):
        cid = str(record.get("conversation_id") or record.get("id") or "")
        where = f"{path}: conversation {n} ({cid or 'no id'})"
        mapping = record.get("mapping")
        if not cid or not isinstance(mapping, dict):
            raise ChatFileError(f"{where}: needs an id and a 'mapping' of messages")
        branch, node, seen = [], record.get("current_node"), set()
        while node is not None:
            if node in seen or node not in mapping:
                raise ChatFileError(f"{where}: message tree broken at node {node!r}")
            seen.add(node)
            branch.append(mapping[node])
            node = mapping[node].get("parent")
        messages = []
        for entry in reversed(branch):
            message = entry.get("message") or {}
            role = (message.get("author") or {}).get("role")
            parts = (message.get("content") or {}).get("parts") or []
            text = "\n".join(p for p in parts if isinstance(p, str)).strip()
            if role in ("user", "assistant") and text:  # system prompts and tool output are not the conversation
                messages.append(ChatMessage(str(message.get("id") or entry.get("id")), role, text,
                                            from_epoch(message.get("create_time"), f"{where}, message {entry.get('id')}")))
        out.append(Conversation(cid, str(record.get("title") or ""), messages))
    return out


def claude(path: Path) -> list[Conversation]:
    """Claude's conversations.json: each conversation's `chat_messages` in order."""
    out = []
    for n, record in enumerate(_records(load_json(path), path)):
        cid = str(record.get("uuid") or "")
        where = f"{path}: conversation {n} ({cid or 'no uuid'})"
        chat = record.get("chat_messages")
        if not cid or not isinstance(chat, list):
            raise ChatFileError(f"{where}: needs a uuid and 'chat_messages'")
        messages = []
        for m, message in enumerate(chat):
            at = f"{where}, message {m}"
            if not isinstance(message, dict) or not message.get("uuid"):
                raise ChatFileError(f"{at}: needs a uuid")
            text = text_of(message.get("text") or "", at) or "\n".join(
                text_of(part.get("text", ""), at) for part in message.get("content") or []
                if isinstance(part, dict) and part.get("type") == "text")
            speaker = "user" if message.get("sender") == "human" else message.get("sender")
            if text.strip() and speaker:
                messages.append(ChatMessage(str(message["uuid"]), str(speaker), text.strip(),
                                            from_iso(message.get("created_at"), at)))
        out.append(Conversation(cid, str(record.get("name") or ""), messages))
    return out


def slack(path: Path) -> list[Conversation]:
    """Slack's export, as its folder or zip: users.json, channels.json, and a folder per channel
    of one file per day. A channel's day is a conversation; a message's author is its user_id."""
    if zipfile.is_zipfile(path):
        with tempfile.TemporaryDirectory() as tmp:
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():  # no member may land outside the folder
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise ChatFileError(f"{path}: the archive member {member!r} points outside it")
                archive.extractall(tmp)
            return _slack_folder(Path(tmp), shown=path)
    return _slack_folder(path, shown=path)


def _slack_folder(root: Path, *, shown: Path) -> list[Conversation]:
    if not (root / "channels.json").is_file():
        raise ChatFileError(f"{shown}: a Slack export holds channels.json (and users.json) at its top")
    names = {}
    if (root / "users.json").is_file():
        for user in _records(load_json(root / "users.json"), shown / "users.json"):
            names[user.get("id")] = user.get("real_name") or user.get("name") or user.get("id")
    out = []
    for channel in _records(load_json(root / "channels.json"), shown / "channels.json"):
        name = str(channel.get("name") or "")
        if not name or not (root / name).is_dir():
            continue  # listed but exported without messages
        for day in sorted((root / name).glob("*.json")):
            where = shown / name / day.name
            messages = []
            for m, message in enumerate(_records(load_json(day), where)):
                if message.get("type") != "message" or message.get("subtype") or not message.get("ts"):
                    continue  # joins, topics, bots: not what anyone said
                at = f"{where}, message {m}"
                text = text_of(message.get("text", ""), at).strip()
                ts = str(message["ts"])
                try:
                    when = from_epoch(float(ts), at)
                except ValueError:
                    raise ChatFileError(f"{at}: ts {ts!r} is not seconds since 1970") from None
                if text:
                    author = str(message.get("user") or "")
                    messages.append(ChatMessage(ts, str(names.get(author) or author or "unknown"), text, when, author))
            out.append(Conversation(f"{channel.get('id') or name}:{day.stem}", f"#{name} {day.stem}", messages))
    return out


def jsonl(path: Path) -> list[Conversation]:
    """One message a line: {"conversation_id", "message_id", "speaker", "text", "time" (ISO 8601,
    optional), "user_id" (optional), "title" (optional)}; a conversation's messages in order."""
    conversations: dict[str, Conversation] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ChatFileError(f"{path}: not UTF-8 text") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ChatFileError(f"{where}: not JSON ({exc.msg})") from None
        missing = [k for k in ("conversation_id", "message_id", "speaker", "text")
                   if not isinstance(record, dict) or not str(record.get(k) or "").strip()]
        if missing:
            raise ChatFileError(f"{where}: needs {', '.join(missing)}")
        cid = str(record["conversation_id"])
        conversation = conversations.setdefault(cid, Conversation(cid, str(record.get("title") or "")))
        conversation.messages.append(ChatMessage(str(record["message_id"]), str(record["speaker"]),
                                                 text_of(record["text"], where).strip(),
                                                 from_iso(record.get("time"), where), str(record.get("user_id") or "")))
    return list(conversations.values())


READERS = {"chatgpt": chatgpt, "claude": claude, "slack": slack, "jsonl": jsonl}
