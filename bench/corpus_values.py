"""The planted values of the content corpus (bench/content_corpus.py): secrets and personal data
drawn from a seeded generator, each valid by its own rules (Luhn, check digits, assigned phone
ranges) and in the formats people write."""
from __future__ import annotations

import base64
import datetime
import json
import random
import string
from collections.abc import Callable

import phonenumbers
from stdnum import iban, luhn
from stdnum.cn import ric

SEED = 20250606

UPPER, LOWER, DIGITS = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UPPER + LOWER + DIGITS
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"

Make = Callable[[random.Random], str]


def chars(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def group(digits: str, sizes: tuple[int, ...], sep: str) -> str:
    parts, i = [], 0
    for size in sizes:
        parts.append(digits[i:i + size])
        i += size
    if i < len(digits):
        parts.append(digits[i:])
    return sep.join(p for p in parts if p)


# ---------------------------------------------------------------- secrets

def aws_key_id(rng: random.Random) -> str:
    return rng.choice(["AKIA", "ASIA"]) + chars(rng, UPPER + DIGITS, 9) + "EXAMPLE"


def aws_secret(rng: random.Random) -> str:
    return chars(rng, B64, 30) + "EXAMPLEKEY"


def gcp_key(rng: random.Random) -> str:
    return "AIza" + chars(rng, B64URL, 35)


def github_token(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return "github_pat_" + chars(rng, ALNUM, 22) + "_" + chars(rng, ALNUM, 59)
    return rng.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + chars(rng, ALNUM, 36)


def slack_token(rng: random.Random) -> str:
    return rng.choice([
        f"xoxb-{chars(rng, DIGITS, 11)}-{chars(rng, DIGITS, 13)}-{chars(rng, ALNUM, 24)}",
        f"xoxp-{chars(rng, DIGITS, 11)}-{chars(rng, DIGITS, 11)}-{chars(rng, DIGITS, 13)}-{chars(rng, HEX, 32)}",
        f"xapp-1-A{chars(rng, UPPER + DIGITS, 10)}-{chars(rng, DIGITS, 13)}-{chars(rng, HEX, 64)}",
        f"xoxe.xoxp-1-{chars(rng, B64URL, 140)}",
    ])


def slack_webhook(rng: random.Random) -> str:
    return (f"https://hooks.slack.com/services/T{chars(rng, UPPER + DIGITS, 8)}/B{chars(rng, UPPER + DIGITS, 10)}/"
            f"{chars(rng, ALNUM, 24)}")


def stripe_key(rng: random.Random) -> str:
    prefix = rng.choice(["sk_live_", "sk_test_", "rk_live_", "pk_live_", "whsec_"])
    return prefix + chars(rng, ALNUM, rng.choice([24, 32, 99]))


def openai_key(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return "sk-" + chars(rng, ALNUM, 20) + "T3BlbkFJ" + chars(rng, ALNUM, 20)
    return rng.choice(["sk-proj-", "sk-proj-", "sk-svcacct-", "sk-admin-"]) + chars(rng, B64URL, rng.randint(74, 156))


def anthropic_key(rng: random.Random) -> str:
    return rng.choice(["sk-ant-api03-", "sk-ant-api03-", "sk-ant-admin01-"]) + chars(rng, B64URL, 93) + "AA"


def pem_lines(rng: random.Random) -> list[str]:
    body = base64.b64encode(rng.randbytes(rng.randint(150, 400))).decode()
    return [body[i:i + 64] for i in range(0, len(body), 64)]


def _pem_label(rng: random.Random) -> str:
    return rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY",
                       "ENCRYPTED PRIVATE KEY"])


def pem_block(rng: random.Random) -> str:
    label = _pem_label(rng)
    return "\n".join([f"-----BEGIN {label}-----", *pem_lines(rng), f"-----END {label}-----"])


def pem_truncated(rng: random.Random) -> str:
    """A paste cut off before its END line."""
    return "\n".join([f"-----BEGIN {_pem_label(rng)}-----", *pem_lines(rng)])


def pem_in_json(rng: random.Random) -> str:
    """As a service account's JSON holds it: newlines written as \\n inside the string."""
    lines = ["-----BEGIN PRIVATE KEY-----", *pem_lines(rng), "-----END PRIVATE KEY-----"]
    return "\\n".join(lines)


def jwt(rng: random.Random) -> str:
    header = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    payload = {"sub": str(rng.randint(10**5, 10**9)), "name": rng.choice(NAMES)[0].capitalize(),
               "iat": rng.randint(1_600_000_000, 1_750_000_000)}
    return ".".join([b64url(json.dumps(header, separators=(",", ":")).encode()),
                     b64url(json.dumps(payload, separators=(",", ":")).encode()),
                     b64url(rng.randbytes(32))])


def opaque_token(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return "ya29.a0" + chars(rng, B64URL, rng.randint(60, 120))
    return chars(rng, ALNUM, rng.randint(24, 48))


def url_password(rng: random.Random) -> str:
    password = chars(rng, ALNUM + "-._~", rng.randint(8, 20))
    return password if rng.random() < 0.7 else password[:4] + rng.choice(["%40", "%21", "%23"]) + password[4:]


def random_token(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        return chars(rng, ALNUM, rng.randint(24, 64))
    if kind < 0.7:
        return base64.b64encode(rng.randbytes(rng.randint(18, 48))).decode()
    return b64url(rng.randbytes(rng.randint(18, 48)))


# ---------------------------------------------------------------- personal data

NAMES = [("alice", "smith"), ("bob", "jones"), ("carol", "nguyen"), ("david", "miller"), ("emma", "garcia"),
         ("frank", "wilson"), ("grace", "lee"), ("henry", "brown"), ("wei", "zhang"), ("na", "li"),
         ("fang", "wang"), ("jing", "liu"), ("lei", "chen"), ("min", "yang"), ("qiang", "zhao"), ("yan", "huang")]
DOMAINS = ["example.com", "example.org", "example.net", "mail.example.com", "corp.example.org", "eu.example.net"]


def email(rng: random.Random) -> str:
    first, last = rng.choice(NAMES)
    local = rng.choice([f"{first}.{last}", f"{first[0]}{last}{rng.randint(1, 99)}", f"{last}_{first}",
                        f"{first}{rng.randint(1970, 2005)}", f"{first}+{rng.choice(['news', 'work', 'shop'])}"])
    address = f"{local}@{rng.choice(DOMAINS)}"
    return address.upper() if rng.random() < 0.1 else address.title() if rng.random() < 0.1 else address


US_AREAS = ["201", "212", "213", "305", "312", "408", "415", "503", "512", "617", "646", "702", "718", "808", "917"]


def us_phone(rng: random.Random) -> str:
    area, line = rng.choice(US_AREAS), f"01{rng.randint(0, 99):02d}"
    return rng.choice([f"({area}) 555-{line}", f"{area}-555-{line}", f"{area}.555.{line}", f"+1 {area} 555 {line}",
                       f"+1-{area}-555-{line}", f"{area}555{line}", f"1-{area}-555-{line}", f"{area} 555 {line}",
                       f"1 ({area}) 555-{line}", f"1.{area}.555.{line}"])


def us_phone_dialable(rng: random.Random) -> str:
    """As a tel: link holds it."""
    area, line = rng.choice(US_AREAS), f"01{rng.randint(0, 99):02d}"
    return rng.choice([f"+1{area}555{line}", f"+1-{area}-555-{line}"])


def cn_mobile_digits(rng: random.Random) -> str:
    while True:
        digits = "1" + rng.choice("3456789") + chars(rng, DIGITS, 9)
        if phonenumbers.is_valid_number(phonenumbers.parse(digits, "CN")):
            return digits


def cn_mobile(rng: random.Random) -> str:
    d = cn_mobile_digits(rng)
    return rng.choice([d, group(d, (3, 4, 4), " "), group(d, (3, 4, 4), "-"), f"+86 {group(d, (3, 4, 4), ' ')}",
                       f"+86-{d}", f"+86{d}", f"0086 {d}", f"(+86) {group(d, (3, 4, 4), ' ')}",
                       f"+86 {group(d, (3, 4, 4), '-')}"])


def cn_landline(rng: random.Random) -> str:
    area, first = rng.choice([("010", "6"), ("021", "6"), ("020", "8"), ("0755", "8"), ("0571", "8"), ("028", "8")])
    local = first + chars(rng, DIGITS, 7)
    return rng.choice([f"{area}-{local}", f"{area}-{local[:4]} {local[4:]}", f"({area}) {local}",
                       f"+86 {area[1:]} {local[:4]} {local[4:]}"])


def intl_phone(rng: random.Random) -> str:
    return rng.choice([f"+44 20 7946 0{rng.randint(0, 999):03d}", f"+61 2 5550 {rng.randint(0, 9999):04d}",
                       f"+33 1 99 00 {rng.randint(0, 99):02d} {rng.randint(0, 99):02d}"])


def any_phone(rng: random.Random) -> str:
    return rng.choice([us_phone, cn_mobile, cn_mobile, cn_landline, intl_phone])(rng)


CARD_PREFIXES = [("4", 16), ("4", 16), ("51", 16), ("53", 16), ("55", 16), ("2221", 16), ("2720", 16), ("34", 15),
                 ("37", 15), ("6011", 16), ("3530", 16), ("3566", 16), ("62", 16), ("62", 19), ("622848", 19),
                 ("621700", 19), ("36", 14), ("65", 16)]


def card_digits(rng: random.Random) -> str:
    prefix, length = rng.choice(CARD_PREFIXES)
    body = prefix + chars(rng, DIGITS, length - len(prefix) - 1)
    return body + luhn.calc_check_digit(body)


def format_card(rng: random.Random, digits: str) -> str:
    sizes = (4, 6, 5) if len(digits) == 15 else (4, 6, 4) if len(digits) == 14 else (4, 4, 4, 4)
    return rng.choice([digits, group(digits, sizes, " "), group(digits, sizes, "-")])


def card(rng: random.Random) -> str:
    return format_card(rng, card_digits(rng))


def _ssn_digits(rng: random.Random) -> str:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    return f"{area:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}"


def ssn(rng: random.Random) -> str:
    return group(_ssn_digits(rng), (3, 2, 4), rng.choice("- "))


def ssn_named(rng: random.Random) -> str:
    """Where the sentence says SSN: nine bare digits are written too."""
    digits = _ssn_digits(rng)
    return rng.choice([digits, group(digits, (3, 2, 4), "-"), group(digits, (3, 2, 4), " ")])


CN_REGIONS = ["110101", "110105", "110108", "120101", "310101", "310104", "320102", "330106", "330102", "340104",
              "350203", "370202", "410105", "420106", "430104", "440103", "440106", "440305", "440304", "441900",
              "510104", "510107", "610113", "210202", "230103", "350102", "360102"]


def ric_digits(rng: random.Random) -> str:
    while True:
        born = datetime.date(1950, 1, 1) + datetime.timedelta(days=rng.randint(0, 20000))
        body = rng.choice(CN_REGIONS) + born.strftime("%Y%m%d") + chars(rng, DIGITS, 3)
        number = body + ric.calc_check_digit(body + "0")
        if ric.is_valid(number):
            return number


def cn_id(rng: random.Random) -> str:
    digits = ric_digits(rng)
    return rng.choice([digits, digits, digits.lower(), group(digits, (6, 8, 4), " ")])


# Country -> the BBAN's parts (kind, length): n digits, a capitals, c either.
IBAN_FORMATS: dict[str, tuple[tuple[str, int], ...]] = {
    "DE": (("n", 8), ("n", 10)), "GB": (("a", 4), ("n", 14)), "FR": (("n", 10), ("c", 11), ("n", 2)),
    "NL": (("a", 4), ("n", 10)), "IT": (("a", 1), ("n", 10), ("c", 12)), "CH": (("n", 5), ("c", 12)),
    "PL": (("n", 24),), "AT": (("n", 16),), "IE": (("a", 4), ("n", 14)),
}
IBAN_ALPHABETS = {"n": DIGITS, "a": UPPER, "c": UPPER + DIGITS}


def iban_value(rng: random.Random) -> str:
    while True:
        country = rng.choice(list(IBAN_FORMATS))
        bban = "".join(chars(rng, IBAN_ALPHABETS[kind], n) for kind, n in IBAN_FORMATS[country])
        number = country + iban.calc_check_digits(country + "00" + bban) + bban
        if iban.is_valid(number):
            break
    spaced = iban.format(number)
    return rng.choice([spaced, spaced, number, spaced.lower()])
