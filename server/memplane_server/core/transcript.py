"""Queries that are a conversation transcript: agents often search with the recent dialogue
itself. Its speaker labels are noise to both channels, and the last turn (the message about to
be answered) is what the wanted memory bears on, so Search also looks for that turn alone."""
from __future__ import annotations

import re
from dataclasses import dataclass

# `<Name>:"text"`, `Name: text`, `User：text`; a label is short and has no sentence punctuation.
_TURN = re.compile(r"^\s*<?(?P<speaker>[^<>:：\n\"“”.?!。？！]{1,40})>?\s*[:：]\s*(?P<text>.*?)\s*$")
_MARKER = re.compile(r"^\s*<[A-Z]{2,8}>\s*$")  # <BOD>, <EOD> and the like
_QUOTES = "\"'“”‘’「」"


@dataclass(frozen=True)
class Transcript:
    text: str  # every turn's words, without speaker labels
    last_turn: str


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
    return Transcript("\n".join(turns), turns[-1])
