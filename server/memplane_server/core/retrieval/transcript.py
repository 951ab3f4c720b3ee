"""Queries that are a conversation transcript: agents often search with the recent dialogue
itself. Its speaker labels are noise to both channels, and the last turn (the message about to
be answered) is what the wanted memory bears on, so Search also looks for that turn alone."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..write.emotion import emotions

# `<Name>:"text"`, `Name: text`, `User：text`; a label is short and has no sentence punctuation.
_TURN = re.compile(r"^\s*<?(?P<speaker>[^<>:：\n\"“”.?!。？！]{1,40})>?\s*[:：]\s*(?P<text>.*?)\s*$")
_MARKER = re.compile(r"^\s*<[A-Z]{2,8}>\s*$")  # <BOD>, <EOD> and the like
_QUOTES = "\"'“”‘’「」"
# Labels that name the agent's side of a dialogue; every other speaker is the user (or users).
ASSISTANT_LABELS = frozenset(
    "assistant ai bot agent system model chatbot gpt chatgpt 助手 助理 小助手 智能助手 机器人 客服 系统 ai助手".split())


@dataclass(frozen=True)
class Transcript:
    text: str  # every turn's words, without speaker labels
    last_turn: str
    turns: tuple[str, ...] = ()
    speakers: tuple[str, ...] = ()

    def user_turns(self) -> list[str] | None:
        """The turns of the speakers who are not the assistant, in order; None when no speaker is
        labelled as an assistant (the roles are then unknown)."""
        roles = [speaker.lower() in ASSISTANT_LABELS for speaker in self.speakers]
        if not any(roles):
            return None
        return [turn for turn, assistant in zip(self.turns, roles) if not assistant]

    def words(self, user_only: bool) -> str:
        """Every turn's words, or (user_only, when the roles are known) the user's alone."""
        mine = self.user_turns() if user_only else None
        return "\n".join(mine) if mine else self.text

    def feelings(self) -> list[str]:
        """What the user's own words feel (all words when the roles are unknown)."""
        mine = self.user_turns()
        return emotions("\n".join(mine) if mine else self.text)

    def focus(self, user_turns: int) -> str:
        """What the wanted memory bears on most: the user's last `user_turns` utterances (what the
        agent is about to answer, and what led to it) when the roles are known, else the last turn."""
        mine = self.user_turns()
        return "\n".join(mine[-user_turns:]) if mine and user_turns > 0 else self.last_turn


def read_transcript(query: str) -> Transcript | None:
    """The turns of a query made of `speaker: text` lines where some speaker speaks twice (which
    tells a dialogue from a list of `key: value` lines); None for anything else."""
    turns, speakers = [], []
    for line in query.splitlines():
        if not line.strip() or _MARKER.match(line):
            continue
        match = _TURN.match(line)
        if match is None:
            return None
        text = match.group("text").strip(_QUOTES).strip()
        if text:
            turns.append(text)
            speakers.append(match.group("speaker").strip())
    if len(set(speakers)) == len(speakers):
        return None
    return Transcript("\n".join(turns), turns[-1], tuple(turns), tuple(speakers))
