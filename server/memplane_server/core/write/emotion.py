"""The feelings a user's own words express, told by cue words (Chinese and English), as
plain labels: a memory of how someone felt is found by a query that feels the same."""
from __future__ import annotations

import re

# label -> cue words; a label is itself a cue. Chinese cues are matched as substrings, English
# ones as words.
_CUES: dict[str, tuple[str, ...]] = {
    "开心": ("开心", "高兴", "快乐", "太棒", "真棒", "好棒", "哈哈", "幸福", "满意", "好玩", "有趣", "喜欢",
           "happy", "glad", "great", "fun", "love", "awesome"),
    "兴奋": ("兴奋", "激动", "excited", "thrilled"),
    "期待": ("期待", "盼望", "等不及", "迫不及待", "looking forward", "can't wait"),
    "焦虑": ("焦虑", "紧张", "担心", "不安", "压力", "着急", "nervous", "worried", "anxious", "stressed"),
    "害怕": ("害怕", "恐惧", "吓", "scared", "afraid", "frightened"),
    "悲伤": ("悲伤", "难过", "伤心", "哭", "失落", "想念", "sad", "upset", "cried", "miss"),
    "失望": ("失望", "可惜", "遗憾", "disappointed", "let down"),
    "愤怒": ("愤怒", "生气", "气死", "讨厌", "烦", "angry", "mad", "annoyed", "furious"),
}
_ENGLISH = {label: re.compile(r"\b(" + "|".join(re.escape(c) for c in cues if c.isascii()) + r")\b", re.I)
            for label, cues in _CUES.items()}


def emotions(text: str) -> list[str]:
    """The labels whose cues the text holds, in a fixed order."""
    return [label for label, cues in _CUES.items()
            if any(c in text for c in cues if not c.isascii()) or _ENGLISH[label].search(text)]
