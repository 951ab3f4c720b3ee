"""Time ranges named in a search query ("last week", "in May 2023", "上个月", "三天前"), without an LLM.

Rules:
- Calendar arithmetic happens in the caller's zone (UTC by default); ranges come back as
  [start, end) in UTC. Weeks start on Monday.
- A calendar phrase covers the whole unit it lands in: "3 days ago"/"三天前" is that day,
  "2 weeks ago" that Monday-based week, "last month"/"上个月" that month, "去年" that year.
- Rolling phrases end at `now`: "the past 3 days", "in the last week", "最近三天";
  "recently"/"lately"/"最近"/"近期" mean the past 14 days.
- "earlier this week/month/year" runs from the start of that unit to `now`.
- A date without a year ("in May", "May 8", "五月", "5月8日") is the most recent one not after
  today. "last Monday" is the most recent Monday before today; "on Monday"/"周一"/"星期一" may
  be today. A Chinese prefix names a calendar week: "上周一" is Monday of last week, "这周日"
  Sunday of this week. "last weekend"/"上周末" is Saturday and Sunday of last week.
- "the day/week/month before/after X" is that much time just before X starts or after it ends
  ("the week before 9 June 2023" is 2-9 June), for any expression X above.
- "last week" is the calendar week; with "the" or a count ("in the last week", "last 3 days")
  it is rolling.
- Guards against false hits: a month name alone needs "in"/"during"/"of" before it ("May I
  ask", "march on" name no month); a day before a month ("8 May") needs a year, an ordinal or
  a preposition ("these 2 may differ"); a four-digit number is a year only after
  "in"/"of"/"during", in a date, or before 年, and only within 1900-2100.
- Impossible dates ("31 February 2023") name nothing, and no input makes the parser raise.
- Several expressions: the leftmost wins; of those starting at the same place, the longest
  ("去年五月" over "去年", "in the last 3 days" over "last 3 days").
"""
from __future__ import annotations

import re
from calendar import monthrange
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from typing import Callable, Iterator, NamedTuple
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class TimeRange:
    start: datetime  # inclusive, UTC
    end: datetime  # exclusive, UTC
    matched: str  # the part of the query that named the range


_Span = tuple[datetime, datetime]

_RECENT_DAYS = 14
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
_WEEKDAYS = "mon tues wednes thurs fri satur sun".split()
_EN_NUMBERS = {"a": 1, "an": 1} | {
    w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
_ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
_UNITS = {"d": "day", "w": "week", "m": "month", "y": "year",
          "天": "day", "日": "day", "周": "week", "星": "week", "礼": "week", "月": "month", "年": "year"}
_OFFSETS = {"this": 0, "current": 0, "last": -1, "previous": -1, "next": 1,
            "上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "今": 0, "去": -1, "前": -2, "明": 1}
_DAY_WORDS = {"today": 0, "tonight": 0, "this morning": 0, "this afternoon": 0, "this evening": 0,
              "yesterday": -1, "last night": -1, "tomorrow": 1,
              "大前天": -3, "前天": -2, "昨天": -1, "昨日": -1, "昨晚": -1,
              "今天": 0, "今日": 0, "今晚": 0, "今早": 0, "明天": 1}

_NUM = r"[0-9]{1,4}|an?|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_ZH_NUM = r"[0-9]{1,4}|[零〇一二三四五六七八九十两]{1,3}"
_ZH_SMALL = r"[0-9]{1,2}|[零〇一二三四五六七八九十两]{1,3}"
# 月 needs 个 so that "三月前" stays "before March" rather than "three months ago".
_ZH_UNIT = r"个月|个?星期|个?礼拜|天|日|周|年"
_MONTH = (r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
          r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
# Lookbehinds skip words that merely contain a time word: 如今天气, 以前天天, 过去年份, 以上月份, 马上周末,
# and a number before 周 means a count of weeks (两周一次), not a weekday.
_ZH_YEAR_WORD = r"((?<![如至])今|(?<!过)去|(?<![之以提从])前|明)年"
_ZH_PREFIX = r"(?<![以马])(上上|上|这|本|下)个?"


class _Clock(NamedTuple):
    now: datetime  # UTC
    zone: tzinfo
    today: date  # in zone

    def days(self, first: date, after: date) -> _Span:
        return self._at(first), self._at(after)

    def _at(self, day: date) -> datetime:
        return datetime.combine(day, time(), self.zone).astimezone(timezone.utc)

    def monday(self, week_offset: int) -> date:
        return self.today - timedelta(days=self.today.weekday() - 7 * week_offset)

    def calendar(self, unit: str, offset: int) -> _Span:
        first = _first_of(unit, _shift(self.today, unit, offset))
        return self.days(first, _shift(first, unit, 1))

    def rolling(self, unit: str, count: int) -> _Span:
        return _shift(self.now.astimezone(self.zone), unit, -count).astimezone(timezone.utc), self.now

    def weekday_back(self, weekday: int, strict: bool) -> _Span:
        back = (self.today.weekday() - weekday) % 7 or (7 if strict else 0)
        return self.calendar("day", -back)

    def month_or_day(self, year: int | None, month: int, day: int | None) -> _Span:
        if year is None:
            year = self.today.year - ((month, day or 1) > (self.today.month, self.today.day))
        if day:
            return self.calendar_day(date(year, month, day))
        return self.days(date(year, month, 1), _shift(date(year, month, 1), "month", 1))

    def calendar_day(self, day: date) -> _Span:
        return self.days(day, day + timedelta(days=1))

    def year(self, year: int) -> _Span:
        return self.days(date(year, 1, 1), date(year + 1, 1, 1))


def _shift(moment, unit: str, count: int):
    """Moves a date or datetime by whole units, clamping the day of month (Mar 31 - 1 month = Feb 28)."""
    if unit in ("day", "week"):
        return moment + timedelta(days=count * (7 if unit == "week" else 1))
    months = moment.month - 1 + count * (12 if unit == "year" else 1)
    year, month = moment.year + months // 12, months % 12 + 1
    return moment.replace(year=year, month=month, day=min(moment.day, monthrange(year, month)[1]))


def _first_of(unit: str, day: date) -> date:
    if unit == "week":
        return day - timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    return day.replace(month=1, day=1) if unit == "year" else day


def _number(text: str) -> int:
    text = text.lower()
    if text.isascii() and text.isdigit():
        return int(text)
    if text in _EN_NUMBERS:
        return _EN_NUMBERS[text]
    tens, ten, units = text.partition("十")
    if not ten:
        return _zh_digit(text)
    return (_zh_digit(tens) if tens else 1) * 10 + (_zh_digit(units) if units else 0)


def _zh_digit(text: str) -> int:
    if text not in _ZH_DIGITS:
        raise ValueError(f"not a Chinese digit: {text!r}")
    return _ZH_DIGITS[text]


def _year(text: str) -> int:
    year = int(text)
    if not 1900 <= year <= 2100:
        raise ValueError(f"year out of range: {year}")
    return year


def _unit(text: str) -> str:
    return _UNITS[text.lower().lstrip("个")[0]]


def _en_month(m: re.Match[str], c: _Clock) -> _Span | None:
    prep, d1, ordinal, d2 = (m["prep"] or "").lower(), m["d1"], m["ord"], m["d2"]
    if (d1 and d2) or (d1 and not (m["y"] or prep or ordinal)):
        return None
    if not (d1 or d2 or m["y"] or prep in ("in", "during", "of")):
        return None
    year = _year(m["y"]) if m["y"] else None
    return c.month_or_day(year, _MONTHS.index(m["month"][:3].lower()) + 1, int(d1 or d2 or 0))


def _zh_month(m: re.Match[str], c: _Clock) -> _Span:
    digits, word, month, day = m.groups()
    year = _year(digits) if digits else (c.today.year + _OFFSETS[word] if word else None)
    return c.month_or_day(year, _number(month), _number(day) if day else None)


def _zh_weekday(m: re.Match[str], c: _Clock) -> _Span:
    weekday = min("一二三四五六日天".index(m[2]), 6)
    if m[1] is None:
        return c.weekday_back(weekday, strict=False)
    return c.calendar_day(c.monday(_OFFSETS[m[1]]) + timedelta(days=weekday))


def _weekend(m: re.Match[str], c: _Clock) -> _Span:
    saturday = c.monday(_OFFSETS[(m[1] or m[2]).lower()]) + timedelta(days=5)
    return c.days(saturday, saturday + timedelta(days=2))


def _en_rolling(m: re.Match[str], c: _Clock) -> _Span | None:
    the, word, count, unit = m.groups()
    if word.lower() == "last" and not (the or count):
        return None  # "last week" is the calendar week, handled elsewhere
    return c.rolling(_unit(unit), _number(count) if count else 1)


_Rule = Callable[[re.Match[str], _Clock], _Span | None]
_RULES: list[tuple[re.Pattern[str], _Rule]] = [(re.compile(p, re.I | re.A), rule) for p, rule in [
    (r"\b(today|tonight|this\s+(?:morning|afternoon|evening)|yesterday|last\s+night|tomorrow)\b"
     r"|大前天|(?<![之以提从])前天|昨[天日晚]|(?<![如至])今[天日晚早]|(?<![说证表声])明天",
     lambda m, c: c.calendar("day", _DAY_WORDS[" ".join(m[0].lower().split())])),
    (r"\b(this|current|last|previous|next)\s+(week|month|year)\b",
     lambda m, c: c.calendar(m[2].lower(), _OFFSETS[m[1].lower()])),
    (_ZH_PREFIX + r"(周|星期|礼拜|月)", lambda m, c: c.calendar(_unit(m[2]), _OFFSETS[m[1]])),
    (_ZH_YEAR_WORD, lambda m, c: c.calendar("year", _OFFSETS[m[1]])),
    (rf"\b({_NUM})\s+(day|week|month|year)s?\s+ago\b|(?<![0-9])({_ZH_NUM})({_ZH_UNIT})[之以]?前",
     lambda m, c: c.calendar(_unit(m[2] or m[4]), -_number(m[1] or m[3]))),
    (rf"(?:\b(?:in|over|during|for|within)\s+)?\b(the\s+)?(past|last)\s+(?:({_NUM})\s+)?"
     r"(day|week|month|year)s?\b", _en_rolling),
    (rf"(?:最近|过去|近)的?({_ZH_NUM})({_ZH_UNIT})", lambda m, c: c.rolling(_unit(m[2]), _number(m[1]))),
    (r"\b(?:recently|lately)\b|最近|近期|近来", lambda m, c: c.rolling("day", _RECENT_DAYS)),
    (r"\bearlier\s+this\s+(week|month|year)\b", lambda m, c: (c.calendar(m[1].lower(), 0)[0], c.now)),
    (r"\b(last|on|this\s+past)\s+(mon|tues|wednes|thurs|fri|satur|sun)day\b",
     lambda m, c: c.weekday_back(_WEEKDAYS.index(m[2].lower()), strict=m[1].lower() != "on")),
    (rf"(?<![0-9零〇一二三四五六七八九十两个])(?:{_ZH_PREFIX})?(?:周|星期|礼拜)([一二三四五六日天])", _zh_weekday),
    (rf"\b(this|last|next)\s+weekend\b|{_ZH_PREFIX}周末", _weekend),
    (r"(?:\b(?P<prep>in|on|during|of)\s+)?(?:(?<![0-9])(?P<d1>[0-9]{1,2})(?P<ord>st|nd|rd|th)?\s+(?:of\s+)?)?"
     rf"\b(?P<month>{_MONTH})\b(?:\s+(?P<d2>[0-9]{{1,2}})(?:st|nd|rd|th)?\b)?"
     r"(?:,?\s+(?:of\s+)?(?P<y>[0-9]{4})\b)?", _en_month),
    (rf"(?:(?<![0-9])([0-9]{{4}})年|{_ZH_YEAR_WORD})?(?<![0-9])({_ZH_SMALL})月份?(?:({_ZH_SMALL})[日号])?",
     _zh_month),
    (r"\b(?:in|of|during)\s+([0-9]{4})\b(?![-/.][0-9])|(?<![0-9])([0-9]{4})年(?!代)",
     lambda m, c: c.year(_year(m[1] or m[2]))),
    (r"(?<![0-9])([0-9]{4})([-/.])([0-9]{1,2})\2([0-9]{1,2})(?![0-9])",
     lambda m, c: c.calendar_day(date(_year(m[1]), int(m[3]), int(m[4])))),
]]
# "the week before 9 June 2023": the unit next to whatever expression follows.
_NEXT_TO = re.compile(r"\bthe\s+(day|week|month)\s+(before|after)\s+", re.I | re.A)

_Found = tuple[int, int, _Span]


def parse_time_range(query: str, now: datetime, zone: ZoneInfo | None = None) -> TimeRange | None:
    """The time range the query names, or None; `now` without a zone is taken as UTC."""
    zone_or_utc = zone or timezone.utc
    try:
        if now.tzinfo is None:
            now = now.replace(tzinfo=timezone.utc)
        clock = _Clock(now.astimezone(timezone.utc), zone_or_utc, now.astimezone(zone_or_utc).date())
    except (ValueError, OverflowError):
        return None
    found = list(_candidates(query, clock))
    for m in _NEXT_TO.finditer(query):
        inner = max(_candidates(query, clock, at=m.end()), key=lambda f: f[1], default=None)
        if inner is None:
            continue
        span = _safe(_next_to, m, inner[2], clock)
        if span:
            found.append((m.start(), inner[1], span))
    if not found:
        return None
    start, end, (first, after) = min(found, key=lambda f: (f[0], -f[1]))
    return TimeRange(first, after, query[start:end])


def _candidates(query: str, clock: _Clock, at: int | None = None) -> Iterator[_Found]:
    for pattern, rule in _RULES:
        matches = pattern.finditer(query) if at is None else filter(None, [pattern.match(query, at)])
        for m in matches:
            span = _safe(rule, m, clock)
            if span:
                yield m.start(), m.end(), span


def _next_to(m: re.Match[str], inner: _Span, c: _Clock) -> _Span:
    unit, before = m[1].lower(), m[2].lower() == "before"
    edge = (inner[0] if before else inner[1]).astimezone(c.zone).date()
    other = _shift(edge, unit, -1 if before else 1)
    return c.days(other, edge) if before else c.days(edge, other)


def _safe(rule: Callable[..., _Span | None], *args) -> _Span | None:
    try:
        return rule(*args)
    except (ValueError, OverflowError):  # impossible dates and years outside the calendar name nothing
        return None
