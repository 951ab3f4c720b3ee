"""Generated pairs of statements for the merge rule (core/write/observations.statement_key).

A changed pair is one sentence frame filled with each side of a swap: two texts that differ in
exactly one meaning-bearing word (a function word, a number, a unit, a date, a name, a negation),
which embed alike and must never be merged. A true repeat is one text written again with only its
letter case, spacing, full-width forms or closing punctuation changed, which must be merged.
The lists are the tests' own, not the server's: the rule must hold for words it never saw.
"""
from __future__ import annotations

import itertools
import random

SWAPS_EN = [
    ("on", "off"), ("over", "under"), ("to", "from"), ("before", "after"), ("above", "below"),
    ("in", "out"), ("with", "without"), ("always", "never"), ("can", "cannot"), ("more", "less"),
    ("first", "last"), ("up", "down"), ("open", "closed"), ("enable", "disable"), ("allow", "deny"),
    ("increase", "decrease"), ("100", "1000"), ("3", "4"), ("1.5", "15"), ("Monday", "Tuesday"),
    ("January", "June"), ("2024", "2025"), ("km", "miles"), ("dollars", "euros"), ("Alice", "Bob"),
    ("Berlin", "Paris"), ("is", "is not"), ("does", "doesn't"), ("am", "pm"), ("and", "or"),
    ("all", "some"), ("he", "she"), ("must", "may"), ("min", "max"), ("a", "the"), ("no", "any"),
    ("inside", "outside"), ("early", "late"),
]

FRAMES_EN = [
    "Turn the alarm {} at night",
    "Refunds {} 100 dollars need approval",
    "The user moved {} Berlin last year",
    "Deploys {} the release freeze need a change ticket",
    "The weekly meeting starts {} lunch",
    "Store the nightly backups {} the shared drive",
    "The on-call engineer said {} the database is slow",
    "The limit for new accounts is {} per day",
    "Run the migration job {} every deploy",
    "The customer prefers delivery {} the office",
]

SWAPS_ZH = [
    ("前", "后"), ("上", "下"), ("进", "出"), ("不", "没"), ("开", "关"), ("多", "少"), ("早", "晚"),
    ("左", "右"), ("买", "卖"), ("来", "去"), ("大", "小"), ("高", "低"), ("一百", "一千"), ("北京", "上海"),
    ("张三", "李四"), ("周一", "周二"), ("元", "美元"), ("公里", "英里"), ("可以", "不可以"), ("是", "不是"),
    ("和", "或"), ("会", "不会"),
]

FRAMES_ZH = [
    "会议在午饭{}开始",
    "用户{}喜欢喝绿茶",
    "把备份放在{}面的服务器上",
    "退款{}一百元需要主管审批",
    "晚上要把闹钟{}掉",
    "下周{}去北京出差",
    "每次发布{}都要检查日志",
    "{}边的门锁坏了",
]


def changed_pairs() -> list[tuple[str, str]]:
    """Every frame with every swap, in both languages: (stored first, written second)."""
    return [
        (frame.format(a), frame.format(b))
        for swaps, frames in ((SWAPS_EN, FRAMES_EN), (SWAPS_ZH, FRAMES_ZH))
        for frame, (a, b) in itertools.product(frames, swaps)
    ]


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


REPEATS = {
    "the same text": lambda t: t,
    "upper case": str.upper,
    "lower case": str.lower,
    "spaces doubled": lambda t: t.replace(" ", "  "),
    "spaces around": lambda t: f"  {t} ",
    "a closing full stop": lambda t: t + ".",
    "a closing exclamation mark": lambda t: t + "!",
    "a closing ideographic full stop": lambda t: t + "。",
    "a full-width closing mark": lambda t: t + "！",
    "full-width letters and digits": _full_width,
}


def repeats(texts: list[str], seed: int = 48) -> list[tuple[str, str, str]]:
    """(original, repeat, how it was changed) for each text, one way of repeating it each, cycled."""
    ways = list(REPEATS.items())
    random.Random(seed).shuffle(ways)
    return [(t, change(t), name) for t, (name, change) in zip(texts, itertools.cycle(ways))]
