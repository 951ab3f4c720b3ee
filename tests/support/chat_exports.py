"""Chat exports made by the tests, in each format's shape (ChatGPT, Claude, Slack, JSONL)."""
from __future__ import annotations

import json
from pathlib import Path


def chatgpt_export(path: Path, conversations: int, messages: int) -> Path:
    """conversations.json with `messages` user/assistant messages each, plus what an export also
    holds: a system message, and an edited first question whose old branch is not current."""
    out = []
    for c in range(conversations):
        mapping = {"root": {"id": "root", "message": None, "parent": None, "children": ["sys"]},
                   "sys": {"id": "sys", "parent": "root", "children": ["old", "m0"],
                           "message": {"id": "sys", "author": {"role": "system"}, "create_time": None,
                                       "content": {"content_type": "text", "parts": ["You are ChatGPT"]}}},
                   "old": {"id": "old", "parent": "sys", "children": [],
                           "message": {"id": "old", "author": {"role": "user"}, "create_time": 1700000000,
                                       "content": {"content_type": "text", "parts": ["a question edited away"]}}}}
        parent = "sys"
        for m in range(messages):
            node = f"m{m}"
            mapping[parent]["children"].append(node) if parent != "sys" else None
            mapping[node] = {"id": node, "parent": parent, "children": [], "message": {
                "id": f"msg-{c}-{m}", "author": {"role": "user" if m % 2 == 0 else "assistant"},
                "create_time": 1700000000 + c * 3600 + m * 30,
                "content": {"content_type": "text", "parts": [f"conversation {c} message {m} about the harbour trip"]}}}
            parent = node
        out.append({"id": f"conv-{c}", "title": f"Trip planning {c}", "mapping": mapping, "current_node": parent})
    path.write_text(json.dumps(out))
    return path
