"""Secrets told by their published formats: cloud and vendor API keys and tokens, PEM private keys,
credentials in an Authorization header or inside a URL. Each detector yields (start, end) spans of
the secret itself, so that redacting them leaves the words around it readable."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator

Span = tuple[int, int]
Scanner = Callable[[str], Iterator[Span]]

# Every pattern is ASCII-only: Chinese text runs into a key with no space between, and a Chinese
# character must end a key, not count as a letter of it. Where a key has one prefix, its pattern
# starts with it and checks the character before it with a lookbehind placed after the prefix: the
# regex engine finds a leading literal with a fast scan, and tries a leading lookbehind at every
# position.
_FLAGS = re.ASCII


def _matching(pattern: str, needles: tuple[str, ...], accept: Callable[[str], bool] | None = None,
              group: int = 0) -> Scanner:
    """A scanner of one pattern; `needles` are substrings every match holds, a test far cheaper
    than the pattern over a text that holds none of them."""
    compiled = re.compile(pattern, _FLAGS)

    def scan(text: str) -> Iterator[Span]:
        if not any(n in text for n in needles):
            return
        for m in compiled.finditer(text):
            if accept is None or accept(m.group(group)):
                yield m.span(group)
    return scan


def _varied(value: str) -> bool:
    # Docs and tutorials write "sk_test_xxxxxxxxxxxxxxxxxxxxxxxx" or "AKIAXXXXXXXXXXXXXXXX"; a real key is random.
    return len(set(value)) >= 8


def _mixed(value: str) -> bool:
    # A random key holds digits and both cases; words joined by hyphens ("sk-learn-...") do not.
    return any(c.isdigit() for c in value) and any(c.islower() for c in value) and any(c.isupper() for c in value)


def _has_digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


_AWS_KEY_ID = _matching(r"A(?<![A-Za-z0-9]A)(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
                        ("AKIA", "ASIA", "ABIA", "ACCA"), accept=_varied)
# A secret access key is 40 characters of base64 with no prefix of its own: only the name written
# next to it tells it from any other blob ("aws_secret_access_key = ...", "SecretAccessKey": ...).
_AWS_SECRET = re.compile(
    r"(?i:aws[ _.-]?secret(?:[ _.-]?access)?(?:[ _.-]?key)?|secret[ _.-]?access[ _.-]?key)"
    r"[^A-Za-z0-9/+\n]{1,8}(?:(?i:is|was)[^A-Za-z0-9/+\n]{1,4})?"
    r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", _FLAGS)


def aws_access_key(text: str) -> Iterator[Span]:
    yield from _AWS_KEY_ID(text)
    lowered = text.lower()
    # The names a secret key follows, tested before the pattern that spells them out.
    if "secret" in lowered and ("aws" in lowered or "access" in lowered):
        yield from (m.span(1) for m in _AWS_SECRET.finditer(text))


gcp_api_key = _matching(r"AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])", ("AIza",), accept=_varied)

github_token = _matching(
    r"g(?<![A-Za-z0-9_]g)(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{50,251})(?![A-Za-z0-9_])",
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), accept=_varied)

# A rotating token is written as its refresh prefix and the token: "xoxe.xoxp-1-...".
_SLACK_TOKEN = _matching(
    r"x(?<![A-Za-z0-9_-]x)(?:oxe\.xox[bp]|ox[abposre]|app)-[A-Za-z0-9_-]{10,250}(?![A-Za-z0-9_-])",
    ("xox", "xapp-"), accept=_has_digit)
# A webhook URL is its own credential: whoever holds it posts to the channel.
_SLACK_WEBHOOK = re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{16,}", _FLAGS)
_SCHEMES = ("https://", "http://")


def slack_token(text: str) -> Iterator[Span]:
    yield from _SLACK_TOKEN(text)
    if "hooks.slack.com" not in text:
        return
    for m in _SLACK_WEBHOOK.finditer(text):
        start = m.start()
        scheme = next((s for s in _SCHEMES if start >= len(s) and text.startswith(s, start - len(s))), "")
        yield start - len(scheme), m.end()


# Publishable test keys (pk_test_) are meant to be shipped in web pages; the live one names the account.
stripe_key = _matching(
    r"(?<![A-Za-z0-9_])(?:(?:sk|rk)_(?:live|test)|pk_live|whsec)_[A-Za-z0-9]{16,247}(?![A-Za-z0-9_])",
    ("_live_", "_test_", "whsec_"), accept=_varied)

anthropic_key = _matching(r"sk-ant-(?<![A-Za-z0-9_-]sk-ant-)[A-Za-z0-9_-]{20,250}(?![A-Za-z0-9_-])",
                          ("sk-ant-",), accept=_varied)

openai_key = _matching(
    r"sk-(?<![A-Za-z0-9_-]sk-)(?!ant-)(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,250}(?![A-Za-z0-9_-])",
    ("sk-",), accept=_mixed)

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----", _FLAGS)
# What follows a BEGIN line whose END line was cut off: base64 lines, the headers of an encrypted
# key, and newlines written out as "\n" where the key sat inside a JSON string. A short chunk is
# only taken at the end of a line (the last line of base64); a short word mid-line is prose.
_PEM_BODY = re.compile(
    r"(?:(?:\s|\\r|\\n)*(?:[A-Za-z0-9+/]{16,}={0,2}|(?:Proc-Type|DEK-Info|Comment):[^\n\\]*"
    r"|[A-Za-z0-9+/]{1,15}={0,2}(?=[ \t]*(?:\r?\n|\\n|$))))*", _FLAGS)


def private_key(text: str) -> Iterator[Span]:
    if "PRIVATE KEY" not in text:
        return
    position = 0
    while m := _PEM_BEGIN.search(text, position):
        end_line = f"-----END {m.group(1)}-----"
        end = text.find(end_line, m.end())
        if end >= 0:
            end += len(end_line)
        else:
            body = _PEM_BODY.match(text, m.end())
            end = body.end() if body else m.end()
        yield m.start(), end
        position = end


# "Authorization: Basic|Token ..." is a credential whatever it looks like; a bare "Bearer ..." is
# only one when what follows looks like a token, not "bearer of bad news" or "Bearer <token>".
_AUTH_SCHEME = re.compile(r"(?i:\b(bearer|basic|token))[ \t]+([A-Za-z0-9._~+/-]{8,}=*)(?![A-Za-z0-9._~+/=-])", _FLAGS)
# The header's name, right before the scheme: "Authorization: Bearer", '"Authorization": "Bearer'.
_AUTH_HEADER = re.compile(r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?\s*\Z", _FLAGS)
_HEADER_REACH = 40


def bearer_token(text: str) -> Iterator[Span]:
    lowered = text.lower()
    if "bearer" not in lowered and "authorization" not in lowered:
        return
    for m in _AUTH_SCHEME.finditer(text):
        header = _AUTH_HEADER.search(text, max(0, m.start() - _HEADER_REACH), m.start()) is not None
        if not header and m.group(1).lower() != "bearer":
            continue
        # A sentence that ends right after the token leaves its full stop inside the match.
        value = m.group(2).rstrip(".")
        token_like = _has_digit(value) and any(c.isalpha() for c in value)
        if token_like and len(value) >= (8 if header else 16):
            yield m.start(2), m.start(2) + len(value)


jwt = _matching(
    r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}(?![A-Za-z0-9_-])", ("eyJ",))

# From the "://" on, which the regex engine finds fast; the scheme before it is checked by hand.
_URL_CREDENTIALS = re.compile(r"://[^\s:/?#@\"'<>]*:([^\s/?#@\"'<>]+)@(?=[A-Za-z0-9\[])", _FLAGS)
# Masks and template variables stand where a password goes in docs and config templates.
_PLACEHOLDER = re.compile(r"\*+|x+|X+|\.+|\$\{?\w+\}?|\{\{[^}]*\}\}|%\(\w+\)s|%s", _FLAGS)


def url_password(text: str) -> Iterator[Span]:
    if "://" not in text:
        return
    for m in _URL_CREDENTIALS.finditer(text):
        if m.start() > 0 and text[m.start() - 1].isalnum() and not _PLACEHOLDER.fullmatch(m.group(1)):
            yield m.span(1)


# Specific formats first: where two detectors find the same span, the earlier name is kept.
SCANNERS: dict[str, Scanner] = {
    "aws_access_key": aws_access_key,
    "gcp_api_key": gcp_api_key,
    "github_token": github_token,
    "slack_token": slack_token,
    "stripe_key": stripe_key,
    "openai_key": openai_key,
    "anthropic_key": anthropic_key,
    "private_key": private_key,
    "jwt": jwt,
    "bearer_token": bearer_token,
    "url_password": url_password,
}
