"""Chat exports read into conversations (chats/formats.py), and bad ones refused naming the record,
before anything is written."""
from __future__ import annotations

import json
import zipfile
from datetime import datetime, timezone

import pytest

from memplane.chats.formats import chatgpt, claude, jsonl, slack
from memplane.chats.importer import parts
from memplane.chats.model import ChatFileError, ChatMessage
from tests.support.chat_exports import chatgpt_export


def test_chatgpt_takes_the_current_branch_of_user_and_assistant_messages(tmp_path):
    [conversation] = chatgpt(chatgpt_export(tmp_path / "conversations.json", 1, 4))
    assert conversation.id == "conv-0" and conversation.title == "Trip planning 0"
    assert [(m.id, m.speaker) for m in conversation.messages] == [
        ("msg-0-0", "user"), ("msg-0-1", "assistant"), ("msg-0-2", "user"), ("msg-0-3", "assistant")]
    assert conversation.messages[1].time == datetime.fromtimestamp(1700000030, tz=timezone.utc)
    assert all("edited away" not in m.text and "You are ChatGPT" not in m.text for m in conversation.messages)


def test_a_chatgpt_conversation_without_its_messages_is_refused_by_its_place(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"id": "a", "mapping": {}, "current_node": None}, {"id": "b"}]))
    with pytest.raises(ChatFileError, match=r"conversation 1 \(b\): needs an id and a 'mapping'"):
        chatgpt(path)


def test_a_file_that_is_not_json_is_refused_with_its_line(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text('[{"id": "a",\n  oops}]')
    with pytest.raises(ChatFileError, match=r"not JSON \(line 2"):
        chatgpt(path)


def test_claude_reads_senders_and_text_parts(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"uuid": "c1", "name": "Refunds", "chat_messages": [
        {"uuid": "u1", "sender": "human", "text": "How do refunds work?", "created_at": "2026-03-01T10:00:00Z"},
        {"uuid": "u2", "sender": "assistant", "text": "", "created_at": "2026-03-01T10:00:05.123+00:00",
         "content": [{"type": "text", "text": "Within 14 days."}, {"type": "tool_use", "name": "x"}]}]}]))
    [conversation] = claude(path)
    assert [(m.speaker, m.text) for m in conversation.messages] == [
        ("user", "How do refunds work?"), ("assistant", "Within 14 days.")]
    assert conversation.messages[0].time == datetime(2026, 3, 1, 10, tzinfo=timezone.utc)


def test_a_claude_time_that_is_not_iso_8601_names_its_message(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"uuid": "c1", "chat_messages": [
        {"uuid": "u1", "sender": "human", "text": "hi", "created_at": "yesterday"}]}]))
    with pytest.raises(ChatFileError, match=r"conversation 0 \(c1\), message 0: the time 'yesterday'"):
        claude(path)


def slack_folder(root):
    (root / "general").mkdir(parents=True)
    (root / "users.json").write_text(json.dumps([{"id": "U1", "name": "ana", "real_name": "Ana Lima"}]))
    (root / "channels.json").write_text(json.dumps([{"id": "C1", "name": "general"}, {"id": "C2", "name": "empty"}]))
    (root / "general" / "2026-03-01.json").write_text(json.dumps([
        {"type": "message", "subtype": "channel_join", "user": "U1", "text": "joined", "ts": "1772355600.000100"},
        {"type": "message", "user": "U1", "text": "The release is on Friday", "ts": "1772355660.000200"},
        {"type": "message", "user": "U9", "text": "Noted", "ts": "1772355720.000300"}]))
    return root


def test_slack_reads_a_channels_day_as_a_conversation_with_each_author(tmp_path):
    [conversation] = slack(slack_folder(tmp_path / "export"))
    assert conversation.id == "C1:2026-03-01" and conversation.title == "#general 2026-03-01"
    assert [(m.speaker, m.user_id, m.text) for m in conversation.messages] == [
        ("Ana Lima", "U1", "The release is on Friday"), ("U9", "U9", "Noted")]


def test_slack_reads_its_zip_as_its_folder(tmp_path):
    folder = slack_folder(tmp_path / "export")
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in folder.rglob("*.json"):
            z.write(path, path.relative_to(folder))
    assert [m.text for m in slack(archive)[0].messages] == ["The release is on Friday", "Noted"]


def test_a_slack_zip_member_pointing_outside_it_is_refused(tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("channels.json", "[]")
        z.writestr("../evil.json", "[]")
    with pytest.raises(ChatFileError, match="points outside it"):
        slack(archive)


def test_jsonl_groups_lines_by_conversation_in_order(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"conversation_id": "a", "message_id": "1", "speaker": "user", "text": "hi", "time": "2026-01-01T09:00:00+08:00"},
        {"conversation_id": "b", "message_id": "1", "speaker": "user", "text": "other", "user_id": "u-7"},
        {"conversation_id": "a", "message_id": "2", "speaker": "assistant", "text": "hello"}]) + "\n")
    a, b = jsonl(path)
    assert [m.text for m in a.messages] == ["hi", "hello"] and b.messages[0].user_id == "u-7"
    assert a.messages[0].time == datetime(2026, 1, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(("line", "said"), [
    ('{"conversation_id": "a", "message_id": "1", "speaker": "user"}', "line 2: needs text"),
    ('{"conversation_id": "a", "message_id": "1", "speaker": "user", "text": ', "line 2: not JSON"),
    ('["a list"]', "line 2: needs conversation_id, message_id, speaker, text"),
])
def test_a_bad_jsonl_line_is_refused_by_its_number(tmp_path, line, said):
    path = tmp_path / "chats.jsonl"
    path.write_text('{"conversation_id": "a", "message_id": "0", "speaker": "user", "text": "fine"}\n' + line + "\n")
    with pytest.raises(ChatFileError, match=said):
        jsonl(path)


def test_a_long_message_is_cut_into_parts_between_utf8_characters():
    message = ChatMessage("m", "user", "é" * 10 + "漢" * 10)
    pieces = list(parts(message, 7))
    assert "".join(text for _, text in pieces) == message.text
    assert all(len(text.encode()) <= 7 for _, text in pieces)
    assert [suffix for suffix, _ in pieces] == [f"#{n}" for n in range(1, len(pieces) + 1)]


def test_a_short_message_is_one_part_without_nul():
    assert list(parts(ChatMessage("m", "user", "a\0b"), 100)) == [("", "ab")]
