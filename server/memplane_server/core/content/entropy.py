"""Secrets with no published format: long random tokens, told from identifiers, hashes, paths and
encoded text by how their characters are drawn."""
from __future__ import annotations

import base64
import binascii
import math
import re
import string
from collections import Counter
from collections.abc import Iterator

Span = tuple[int, int]

# Shorter random strings are mostly ids that name things (video ids, short links); 24 characters of
# base64 are 18 random bytes, the size of the shortest keys in use.
_MIN_LENGTH = 24
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}(?:={1,2})?(?![A-Za-z0-9+/_=-])", re.ASCII)
# A URL from its "://" on (a token holds no ":", so the scheme never matters).
_URL = re.compile(r"://[^\s\"'<>]+", re.ASCII)
_PEM_BEGIN = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----", re.ASCII)
_SSH_KEY_TYPES = (b"ssh-", b"ecdsa-", b"sk-")
# A digest as Subresource Integrity and npm's lockfiles write it: the algorithm, then exactly its
# digest's length of padded base64. A bare base64 digest is not told from a key of the same size
# (an Azure storage key is 64 bytes, as a sha512 is), so only the label excuses it.
_SRI_DIGEST = re.compile(
    r"sha(?:1-[A-Za-z0-9+/]{27}=|256-[A-Za-z0-9+/]{43}=|384-[A-Za-z0-9+/]{64}|512-[A-Za-z0-9+/]{86}==)", re.ASCII)

# Calibrated on random base62 and base64 strings of 24-64 characters next to camelCase, PascalCase
# and snake_case identifiers and paths that hold numbers and acronyms:
# - entropy: a random string of n characters reaches about 0.85 * log2(n) bits per character, a
#   repetitive one ("abc123abc123...") far less;
# - runs: a random string changes between upper, lower, digit and symbol at about 60% of its
#   characters, an identifier only at its word and number boundaries (about 30%);
# - vowels: a fifth of random letters are vowels, twice that of words; between the two run
#   ratios, it decides.
# About 99% of random strings of 24 characters pass and 99.5% of 32 or more; of identifiers made of
# code words, numbers and acronyms, about 0.2%.
_ENTROPY_SHARE = 0.78
_RUNS_SURE, _RUNS_LEAST = 0.50, 0.40
_VOWELS_MOST = 0.32

_UPPER, _LOWER = frozenset(string.ascii_uppercase), frozenset(string.ascii_lowercase)
_KINDS = str.maketrans(
    {**dict.fromkeys(string.ascii_uppercase, "A"), **dict.fromkeys(string.ascii_lowercase, "a"),
     **dict.fromkeys(string.digits, "0")})
_RUN = re.compile(r"(.)\1*", re.S)
_VOWELS = re.compile(r"[aeiouAEIOU]")
_LETTERS = re.compile(r"[A-Za-z]")


# c * log2(c) for each count a character can have among the (at most 64) characters measured.
_COUNT_BITS = [c * math.log2(c) if c else 0.0 for c in range(65)]


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character: log2(n) - sum(c * log2(c)) / n over the counts c."""
    n = len(value)
    return math.log2(n) - sum(map(_COUNT_BITS.__getitem__, Counter(value).values())) / n


def _decodes_to_text(token: str) -> bool:
    """Base64 of readable text is a message someone encoded, not a key: random bytes never decode
    to printable UTF-8."""
    normalized = token.replace("-", "+").replace("_", "/")
    try:
        decoded = base64.b64decode(normalized + "=" * (-len(normalized) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return decoded.isprintable() or all(c.isprintable() or c.isspace() for c in decoded)


def _ssh_public_key(token: str) -> bool:
    """An SSH public key ("ssh-ed25519 AAAAC3Nza...") is random too, and meant to be shared; its wire
    format starts with the key type's length and name."""
    if not token.startswith("AAAA"):
        return False
    try:
        head = base64.b64decode(token[:24], validate=True)
    except binascii.Error:
        return False
    return head[4:].startswith(_SSH_KEY_TYPES)


def _looks_random(token: str) -> bool:
    body = token.rstrip("=")
    n = len(body)
    if n < _MIN_LENGTH:
        return False
    # Hex digests, UUIDs, git SHAs, lowercase paths and words are written in one case.
    drawn = set(body)
    if not (drawn & _UPPER and drawn & _LOWER):
        return False
    # The first 64 characters tell: a longer random string's entropy only grows toward its alphabet's.
    if _entropy(body[:64]) < _ENTROPY_SHARE * math.log2(min(n, 64)):
        return False
    runs = len(_RUN.findall(body.translate(_KINDS))) / n
    if runs < _RUNS_LEAST:
        return False
    if runs < _RUNS_SURE and len(_VOWELS.findall(body)) > _VOWELS_MOST * len(_LETTERS.findall(body)):
        return False
    return not _decodes_to_text(token)


def _pem_blocks(text: str) -> list[Span]:
    """Every whole PEM block: a private key is private_key's, and the rest (certificates, public
    keys) are random too but meant to be shared."""
    blocks: list[Span] = []
    if "-----BEGIN " not in text:
        return blocks
    position = 0
    while m := _PEM_BEGIN.search(text, position):
        end_line = f"-----END {m.group(1)}-----"
        end = text.find(end_line, m.end())
        if end < 0:
            position = m.end()
            continue
        position = end + len(end_line)
        blocks.append((m.start(), position))
    return blocks


def high_entropy_token(text: str) -> Iterator[Span]:
    pem = _pem_blocks(text)
    urls: list[Span] | None = None
    for m in _CANDIDATE.finditer(text):
        start, end = m.span()
        if any(s <= start and end <= e for s, e in pem):
            continue
        token = m.group()
        if not _looks_random(token) or _ssh_public_key(token) or _SRI_DIGEST.fullmatch(token):
            continue
        if urls is None:
            urls = [u.span() for u in _URL.finditer(text)] if "://" in text else []
        # A URL's path names a resource (a document id, a commit); only a query value can be a
        # credential there, and one in the user-info part is url_password's.
        if any(s <= start and end <= e for s, e in urls) and text[start - 1] != "=":
            continue
        yield start, end
