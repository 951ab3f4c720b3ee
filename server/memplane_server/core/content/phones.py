"""Phone numbers, found by phonenumbers (Google's libphonenumber rules) in their regions' national
forms for the US and China and in +CC form for any country, behind a gate of cheap rules that keeps
order numbers, dates, versions and addresses from ever reaching it."""
from __future__ import annotations

import re
import string
from collections.abc import Iterator

import phonenumbers

Span = tuple[int, int]

# The gate before phonenumbers, which costs tens of microseconds a call: a run of at least 8 digits
# (the shortest national number with its area code), separators allowed. Chinese text writes a
# number with no space around it, so the run needs no word boundary.
_PHONE_RUN = re.compile(r"\d(?:[ \t().-]{0,3}\d){7,}", re.ASCII)
_NOT_DIGIT = re.compile(r"\D")
# Characters of context on each side of a run: phonenumbers reads the "+" and "(" before a number,
# and what surrounds it to reject times ("2024-06-15 13:45") and numbers glued to letters.
_PHONE_CONTEXT = 8
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
# Runs shaped like something else that phonenumbers may still read as a number: an IPv4 address
# (182.133.47.249 is a CN mobile to it; a phone's last group has four digits), a version (one digit
# between dots, "Chrome 125.0.6255.200", where a dotted phone groups by two or more after its
# country code, "1.415.555.0132") and a date.
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}", re.ASCII)
_DOTTED_VERSION = re.compile(r"\d\.\d\.|\.\d(?:\.|$)", re.ASCII)
_DATE = re.compile(r"(?:19|20)\d\d[-/.]\d{1,2}[-/.]\d{1,2}(?!\d)", re.ASCII)
_LATIN_LETTERS = frozenset(string.ascii_letters)
_NANP_LEADING = "23456789"  # a US area code and exchange never start with 0 or 1


def _home_regions(digits: str) -> set[str]:
    """The regions in whose national form these digits could be one whole number."""
    if digits.startswith("00"):
        return {"CN"} if len(digits) >= 12 else set()  # the international prefix: 00 and a country code
    if digits.startswith("0"):
        return {"CN"} if 10 <= len(digits) <= 12 else set()  # the trunk 0, an area code, a local number
    if len(digits) == 10:
        return {"US"} if digits[0] in _NANP_LEADING and digits[3] in _NANP_LEADING else set()
    if len(digits) == 11 and digits[0] == "1":
        # 1 before a US number, or a CN mobile (13x to 19x).
        return ({"CN"} if digits[1] in "3456789" else set()) | (
            {"US"} if digits[1] in _NANP_LEADING and digits[4] in _NANP_LEADING else set())
    return set()


def _among_chinese(text: str, start: int, end: int) -> bool:
    return _CJK.search(text, max(0, start - _PHONE_CONTEXT), end + _PHONE_CONTEXT) is not None


def _regions(text: str, run: re.Match[str]) -> set[str]:
    """The regions phonenumbers must read the run in: US and CN numbers are found as people write
    them at home, any other as +CC. Runs that hold no number of a home length from their first
    digit (order and tracking numbers, ISBNs), or that phonenumbers would turn down after all, are
    never parsed."""
    number, start, end = run.group(), run.start(), run.end()
    if _IPV4.fullmatch(number) or _DOTTED_VERSION.search(number) or _DATE.match(number):
        return set()
    # Glued to a Latin letter it is a code ("SF0674988867"), for phonenumbers too.
    if (start > 0 and text[start - 1] in _LATIN_LETTERS) or (end < len(text) and text[end] in _LATIN_LETTERS):
        return set()
    if text[max(0, start - 2):start].strip().endswith("+"):
        return {"US"}  # +CC reads the same whatever the region
    regions: set[str] = set()
    digits = ""
    for group in _NOT_DIGIT.split(number):
        digits += group
        if len(digits) > 15:
            break
        regions |= _home_regions(digits)
    if number.isdigit() and _among_chinese(text, start, end):
        regions.discard("US")  # as _written_as_phone would
    return regions


def _written_as_phone(match: phonenumbers.PhoneNumberMatch, window: str) -> bool:
    """phonenumbers reads any ten digits as a number of some area: a Chinese landline with its trunk
    0 left out, a US number in a Chinese student, staff or order number. A Chinese number written
    at home keeps its trunk 0 or is an 11-digit mobile from 1; among Chinese words, ten bare digits
    are seldom an American phone."""
    raw = match.raw_string
    if "+" in raw:
        return True
    if match.number.country_code == 86:
        digits = _NOT_DIGIT.sub("", raw)
        return digits.startswith("0") or (len(digits) == 11 and digits.startswith("1"))
    return not raw.isdigit() or not _among_chinese(window, match.start, match.end)


def phone(text: str) -> Iterator[Span]:
    windows: list[tuple[int, int, set[str]]] = []
    for run in _PHONE_RUN.finditer(text):
        regions = _regions(text, run)
        if not regions:
            continue
        start, end = max(0, run.start() - _PHONE_CONTEXT), min(len(text), run.end() + _PHONE_CONTEXT)
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end, windows[-1][2] | regions)
        else:
            windows.append((start, end, regions))
    found: set[Span] = set()
    for start, end, regions in windows:
        window = text[start:end]
        for region in sorted(regions):
            for match in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.VALID):
                if _written_as_phone(match, window):
                    found.add((start + match.start, start + match.end))
    yield from sorted(found)
