"""Personal data: email addresses, phone numbers, payment card numbers, national identity numbers
(US SSN, Chinese resident identity number) and IBANs. Numbers are checked by their own rules
(numbering plans, check digits, issuer ranges), so that order numbers, tracking numbers, dates and
prices that merely look alike are left alone."""
from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator

from stdnum import iban as stdnum_iban
from stdnum import luhn
from stdnum.cn import ric
from stdnum.exceptions import ValidationError
from stdnum.us import ssn

from .phones import phone

Span = tuple[int, int]
Scanner = Callable[[str], Iterator[Span]]

# "mailto:" is the one colon an address may follow: "user:password@host" is a URL's credentials and
# "git@github.com:org/repo" an SSH remote, neither a person's address.
_EMAIL = re.compile(
    r"(?:(?<=mailto:)|(?<![A-Za-z0-9._%+/:-]))[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-]|:[A-Za-z0-9/])",
    re.ASCII)
_LOCAL_PART = frozenset(string.ascii_letters + string.digits + "._%+-")
_LOCAL_PART_MAX = 64


def email(text: str) -> Iterator[Span]:
    # From each "@" back to where its local part starts, then the pattern from there: the pattern
    # alone would be tried at every position of the text.
    at = text.find("@")
    while at >= 0:
        start = at
        while start > 0 and at - start < _LOCAL_PART_MAX and text[start - 1] in _LOCAL_PART:
            start -= 1
        m = _EMAIL.match(text, start) if start < at else None
        if m:
            yield m.span()
        at = text.find("@", m.end() if m else at + 1)


# Issuer ranges of the card networks (first digits, low and high) and the lengths each issues.
_SIXTEEN_TO_NINETEEN = frozenset(range(16, 20))
_IIN_RANGES: tuple[tuple[str, str, frozenset[int]], ...] = (
    ("4", "4", frozenset({13, 16, 19})),                      # Visa
    ("51", "55", frozenset({16})),                           # Mastercard
    ("2221", "2720", frozenset({16})),                       # Mastercard
    ("34", "34", frozenset({15})),                           # American Express
    ("37", "37", frozenset({15})),                           # American Express
    ("300", "305", frozenset(range(14, 20))),                # Diners Club
    ("36", "36", frozenset(range(14, 20))),                  # Diners Club
    ("38", "39", _SIXTEEN_TO_NINETEEN),                      # Diners Club
    ("6011", "6011", _SIXTEEN_TO_NINETEEN),                  # Discover
    ("644", "649", _SIXTEEN_TO_NINETEEN),                    # Discover
    ("65", "65", _SIXTEEN_TO_NINETEEN),                      # Discover, RuPay
    ("3528", "3589", _SIXTEEN_TO_NINETEEN),                  # JCB
    ("62", "62", _SIXTEEN_TO_NINETEEN),                      # UnionPay
    ("81", "81", _SIXTEEN_TO_NINETEEN),                      # UnionPay
    ("60", "60", _SIXTEEN_TO_NINETEEN),                      # RuPay, Bank of China debit
    ("2200", "2204", _SIXTEEN_TO_NINETEEN),                  # Mir
    ("50", "50", frozenset(range(13, 20))),                  # Maestro
    ("56", "58", frozenset(range(13, 20))),                  # Maestro
    ("63", "63", frozenset(range(13, 20))),                  # Maestro
    ("67", "67", frozenset(range(13, 20))),                  # Maestro
)
# 13-19 digits, grouped or not. Beside a decimal point it is an amount, beside a letter a code
# ("YT6784946038695"), and beside another group of digits part of a longer number. The lookbehinds
# follow the first digit, not precede it: a pattern that starts with a digit is searched for by a
# fast scan, one that starts with a lookbehind is tried at every position.
_CARD_RUN = re.compile(
    r"\d(?<![0-9A-Za-z]\d)(?<![0-9][., -]\d)(?:[ -]?\d){12,18}(?![0-9A-Za-z]|[., -][0-9])", re.ASCII)
_CARD_SEPARATOR = re.compile(r"[ -]")
# The ranges spelled out, prefix -> lengths, so that a number is looked up by its first 1-4 digits.
_IIN_LENGTHS: dict[str, frozenset[int]] = {
    str(prefix): lengths for lo, hi, lengths in _IIN_RANGES for prefix in range(int(lo), int(hi) + 1)}
_IIN_DIGITS = sorted({len(prefix) for prefix in _IIN_LENGTHS})


def _is_card(digits: str) -> bool:
    issued = any(len(digits) in _IIN_LENGTHS.get(digits[:n], ()) for n in _IIN_DIGITS)
    return issued and luhn.is_valid(digits) and not _identity_number_shaped(digits)


def _identity_number_shaped(digits: str) -> bool:
    """18 digits that open with a Chinese identity number's region and birth date are one whose
    check digit was mistyped, not one of the rare 18-digit cards."""
    if len(digits) != 18:
        return False
    try:
        ric.get_birth_date(digits)
        ric.get_birth_place(digits)
    except ValidationError:
        return False
    return True


def card_number(text: str) -> Iterator[Span]:
    for m in _CARD_RUN.finditer(text):
        if _is_card(_CARD_SEPARATOR.sub("", m.group())):
            yield m.span()


# The identity numbers that open with a digit, found in one pass over the text: a Chinese resident
# identity number (18 characters; spaces may part its region, birth date and sequence), an SSN
# written with dashes or spaces, and nine bare digits, an SSN only where the text names one close
# by (before or after), otherwise any number at all.
_IDENTITY_NUMBER = re.compile(
    r"\d(?<![0-9A-Za-z-]\d)(?:"
    r"(?P<ric>\d{5} ?\d{8} ?\d{3}[0-9Xx](?![0-9A-Za-z]))"
    r"|(?P<ssn>\d{2}(?P<sep>[- ])\d{2}(?P=sep)\d{4}(?![0-9-]))"
    r"|\d{8}(?![0-9]))", re.ASCII)
_SSN_NAME = re.compile(r"(?i:\bssn\b|social security|社会安全号|社保号)", re.ASCII)
_SSN_NAMES = ("ssn", "social security", "社会安全号", "社保号")
_SSN_NAME_REACH = 40


# A resident identity number's date of birth: a calendar date in these years.
_RIC_BIRTH_YEARS = range(1900, 2100)


def _resident_id(number: str) -> bool:
    """The check digit decides, with a date of birth that exists. The region code is not looked up:
    a table of codes misses new and renamed counties, and numbers issued there were stored readable."""
    if number[-1].upper() != ric.calc_check_digit(number):
        return False
    try:
        return ric.get_birth_date(number).year in _RIC_BIRTH_YEARS
    except ValidationError:
        return False


def national_id(text: str) -> Iterator[Span]:
    named: bool | None = None
    for m in _IDENTITY_NUMBER.finditer(text):
        number = m.group()
        if m.group("ric") is not None:
            valid = _resident_id(number.replace(" ", ""))
        elif m.group("ssn") is not None:
            valid = ssn.is_valid(number.replace(m.group("sep"), ""))
        else:
            if named is None:
                lowered = text.lower()
                named = any(name in lowered for name in _SSN_NAMES)
            near = named and _SSN_NAME.search(text, max(0, m.start() - _SSN_NAME_REACH), m.end() + _SSN_NAME_REACH)
            valid = bool(near) and ssn.is_valid(number)
        if valid:
            yield m.span()


# Country code, check digits, then 11-30 characters of the account, grouped by spaces or not. The
# match starts at the check digits (a digit is found by a fast scan; the country code is checked
# behind it). The run may take in words after the IBAN; it is cut back to the longest valid prefix.
_IBAN_RUN = re.compile(r"\d(?<=(?<![A-Za-z0-9])[A-Za-z]{2}\d)\d(?:[ -]?[A-Za-z0-9]){11,30}", re.ASCII)
_IBAN_MIN_LENGTH = 15


def iban(text: str) -> Iterator[Span]:
    for m in _IBAN_RUN.finditer(text):
        start = m.start() - 2
        for end in range(m.end(), start, -1):
            # Cut only between words: never inside a group of the account or a word after it.
            if not text[end - 1].isalnum() or (end < len(text) and text[end].isascii() and text[end].isalnum()):
                continue
            candidate = text[start:end]
            if len(candidate) - candidate.count(" ") - candidate.count("-") < _IBAN_MIN_LENGTH:
                break
            if stdnum_iban.is_valid(candidate):
                yield start, end
                break


SCANNERS: dict[str, Scanner] = {
    "email": email,
    "phone": phone,
    "card_number": card_number,
    "national_id": national_id,
    "iban": iban,
}
