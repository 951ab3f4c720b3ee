"""Writes tests/data/content_corpus.jsonl, the corpus of the content policy's detectors: sentences an
agent might store, in English and Chinese, each holding one planted secret or piece of personal
data (a positive) or a look-alike that is neither (a negative).

Every planted value is drawn at random from a seeded generator and is valid by its own rules (Luhn
for cards, check digits for identity numbers and IBANs, assigned ranges for phone numbers), in the
formats people write (spaces, dashes, +CC, upper and lower case). Where a vendor publishes test
values or a fictional range the values come from it: AWS keys end in EXAMPLE, e-mail domains are
example.com/.org/.net, US numbers are 555-01XX, UK, Australian and French ones are in the ranges
their regulators keep for drama. Look-alikes are drawn the
same way and fail those rules by construction (a Luhn-failing card, an identity number with a
wrong check digit), or are no secret at all (hashes, UUIDs, versions, URLs, identifiers).

Each line: {"text": ..., "lang": "en"|"zh", "detector": name or null, "secret": the planted
substring or null}.

Run:  .venv/bin/python bench/content_corpus.py [--out tests/data/content_corpus.jsonl]
"""
from __future__ import annotations

import argparse
import base64
import datetime
import json
import random
import string
import sys
from collections.abc import Callable
from pathlib import Path

import phonenumbers
from stdnum import iban, luhn
from stdnum.cn import ric

ROOT = Path(__file__).resolve().parent.parent
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


def _pem_lines(rng: random.Random) -> list[str]:
    body = base64.b64encode(rng.randbytes(rng.randint(150, 400))).decode()
    return [body[i:i + 64] for i in range(0, len(body), 64)]


def _pem_label(rng: random.Random) -> str:
    return rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY",
                       "ENCRYPTED PRIVATE KEY"])


def pem_block(rng: random.Random) -> str:
    label = _pem_label(rng)
    return "\n".join([f"-----BEGIN {label}-----", *_pem_lines(rng), f"-----END {label}-----"])


def pem_truncated(rng: random.Random) -> str:
    """A paste cut off before its END line."""
    return "\n".join([f"-----BEGIN {_pem_label(rng)}-----", *_pem_lines(rng)])


def pem_in_json(rng: random.Random) -> str:
    """As a service account's JSON holds it: newlines written as \\n inside the string."""
    lines = ["-----BEGIN PRIVATE KEY-----", *_pem_lines(rng), "-----END PRIVATE KEY-----"]
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


# ---------------------------------------------------------------- positives: (lang, template, value)

def either(*makes: Make) -> Make:
    return lambda rng: rng.choice(makes)(rng)


POSITIVES: dict[str, list[tuple[str, str, Make]]] = {
    "aws_access_key": [
        ("en", "Here's the key for the staging account: {v}, please keep it safe.", aws_key_id),
        ("en", "User pasted their AWS access key id {v} while asking why S3 uploads fail.", aws_key_id),
        ("en", "export AWS_ACCESS_KEY_ID={v}", aws_key_id),
        ("en", "[default]\naws_access_key_id = {v}\nregion = us-east-1", aws_key_id),
        ("en", "aws_secret_access_key = {v}", aws_secret),
        ("en", '"SecretAccessKey": "{v}",', aws_secret),
        ("en", "The CI job failed because {v} was revoked last night.", aws_key_id),
        ("en", "AWS secret key is {v} (rotate after the demo)", aws_secret),
        ("zh", "这是测试环境的 AWS 密钥 {v}，用完记得删。", aws_key_id),
        ("zh", "用户说他的访问密钥是{v}，上传到 S3 一直报 403。", aws_key_id),
        ("zh", "配置文件里写着 AWS_SECRET_ACCESS_KEY={v}", aws_secret),
        ("zh", "请帮我检查一下这个 key：{v} 是不是过期了", aws_key_id),
        ("zh", "AWS secret access key：{v}，下周轮换", aws_secret),
        ("zh", "昨天部署脚本里硬编码了{v}，需要尽快撤销", aws_key_id),
    ],
    "gcp_api_key": [
        ("en", "My Google Maps key is {v}, can you see why geocoding returns REQUEST_DENIED?", gcp_key),
        ("en", "GOOGLE_API_KEY={v}", gcp_key),
        ("en", "Remember the Gemini API key {v} for the translation agent.", gcp_key),
        ("en", "curl 'https://generativelanguage.googleapis.com/v1beta/models?key={v}'", gcp_key),
        ("en", 'Firebase config: apiKey: "{v}", authDomain: "demo-app.firebaseapp.com"', gcp_key),
        ("en", "The YouTube Data API rejected key {v} with quotaExceeded.", gcp_key),
        ("en", "Store this for later - places key {v}", gcp_key),
        ("en", "gcloud printed {v} after creating the key.", gcp_key),
        ("zh", "谷歌地图的 API key 是{v}，帮我记一下", gcp_key),
        ("zh", "Gemini 的密钥：{v}", gcp_key),
        ("zh", "把 {v} 填到 .env 的 GOOGLE_API_KEY 里就行", gcp_key),
        ("zh", "这个 Firebase 项目用的 apiKey 是 {v}，前端已经暴露了", gcp_key),
        ("zh", "用户贴了一个 key {v}，说翻译接口报错", gcp_key),
        ("zh", "记住：YouTube 接口密钥{v}", gcp_key),
    ],
    "github_token": [
        ("en", "git clone https://{v}@github.com/acme/infra.git", github_token),
        ("en", "Use this PAT for the release bot: {v}", github_token),
        ("en", "GITHUB_TOKEN={v}", github_token),
        ("en", "I generated a fine-grained token {v} with repo scope.", github_token),
        ("en", "gh auth login --with-token <<< {v}", github_token),
        ("en", "The Actions log printed {v} in plain text!", github_token),
        ("en", "token: {v}  # expires in 30 days", github_token),
        ("en", "Please revoke {v}, it leaked in the Slack thread.", github_token),
        ("zh", "我的 GitHub 令牌是 {v}，帮我查一下为什么 push 被拒", github_token),
        ("zh", "发布机器人用的 token：{v}", github_token),
        ("zh", "这个 {v} 是上周生成的，有 repo 权限", github_token),
        ("zh", "CI 日志里明文打印了{v}，赶紧撤销", github_token),
        ("zh", "把令牌{v}配置到 secrets 里", github_token),
        ("zh", "个人访问令牌 {v} 30 天后过期", github_token),
    ],
    "slack_token": [
        ("en", "SLACK_BOT_TOKEN={v}", slack_token),
        ("en", "Post alerts to {v}", slack_webhook),
        ("en", "The bot token {v} has chat:write scope.", slack_token),
        ("en", "webhook_url: {v}", slack_webhook),
        ("en", "User token for the export script: {v}", slack_token),
        ("en", """curl -X POST -d '{{"text":"deploy done"}}' {v}""", slack_webhook),
        ("en", "Slack returned invalid_auth for {v}", slack_token),
        ("en", "Our incident channel hook is {v}, don't share it.", slack_webhook),
        ("zh", "Slack 机器人令牌：{v}", slack_token),
        ("zh", "告警发到这个 webhook：{v}", slack_webhook),
        ("zh", "用户说 {v} 突然失效了", slack_token),
        ("zh", "部署完成后往{v}推送消息", slack_webhook),
        ("zh", "导出脚本用的是 {v}", slack_token),
        ("zh", "别把 webhook 地址{v}贴到公开群里", slack_webhook),
    ],
    "stripe_key": [
        ("en", "STRIPE_SECRET_KEY={v}", stripe_key),
        ("en", "Customer support pasted the key {v} into the ticket.", stripe_key),
        ("en", 'stripe.api_key = "{v}"', stripe_key),
        ("en", "The webhook signing secret is {v}.", stripe_key),
        ("en", "Switch the checkout to {v} before launch.", stripe_key),
        ("en", "Restricted key for reporting: {v}", stripe_key),
        ("en", "curl https://api.stripe.com/v1/charges -u {v}:", stripe_key),
        ("en", "Rotate {v} - it was committed to the repo.", stripe_key),
        ("zh", "Stripe 密钥是 {v}，别发给别人", stripe_key),
        ("zh", "支付回调签名密钥：{v}", stripe_key),
        ("zh", "上线前把 key 换成{v}", stripe_key),
        ("zh", "客服工单里有人贴了{v}", stripe_key),
        ("zh", "报表用的受限密钥 {v}", stripe_key),
        ("zh", "这个 {v} 被提交到了仓库里，需要轮换", stripe_key),
    ],
    "openai_key": [
        ("en", "OPENAI_API_KEY={v}", openai_key),
        ("en", "Here is my OpenAI key: {v} - why do I get 429s?", openai_key),
        ("en", 'client = OpenAI(api_key="{v}")', openai_key),
        ("en", "The summarizer agent uses {v} for embeddings.", openai_key),
        ("en", "Found {v} in the notebook output, revoke it.", openai_key),
        ("en", "export OPENAI_API_KEY='{v}'", openai_key),
        ("en", "key for the eval harness -> {v}", openai_key),
        ("en", "I rotated the project key; the new one is {v}.", openai_key),
        ("zh", "我的 OpenAI 密钥是 {v}，为什么一直 429？", openai_key),
        ("zh", "把 api_key 设成{v}就能跑了", openai_key),
        ("zh", "评测脚本用的 key：{v}", openai_key),
        ("zh", "笔记本输出里泄露了 {v}", openai_key),
        ("zh", "新的项目密钥：{v}，旧的已作废", openai_key),
        ("zh", "环境变量 OPENAI_API_KEY={v}", openai_key),
    ],
    "anthropic_key": [
        ("en", "ANTHROPIC_API_KEY={v}", anthropic_key),
        ("en", "My Claude API key is {v}, keep it for the coding agent.", anthropic_key),
        ("en", 'client = anthropic.Anthropic(api_key="{v}")', anthropic_key),
        ("en", "The console showed {v} once; I copied it here.", anthropic_key),
        ("en", "x-api-key: {v}", anthropic_key),
        ("en", "Revoke {v}, it was in a screenshot.", anthropic_key),
        ("en", "Workspace key for evals: {v}", anthropic_key),
        ("en", 'export ANTHROPIC_API_KEY="{v}"', anthropic_key),
        ("zh", "Claude 的 API 密钥：{v}", anthropic_key),
        ("zh", "我把 {v} 配到了编码助手里", anthropic_key),
        ("zh", "请求头 x-api-key: {v}", anthropic_key),
        ("zh", "截图里露出了{v}，需要吊销", anthropic_key),
        ("zh", "评测用的工作区密钥是 {v}", anthropic_key),
        ("zh", "环境变量 ANTHROPIC_API_KEY={v}", anthropic_key),
    ],
    "private_key": [
        ("en", "Here is the deploy key, put it in ~/.ssh/id_ed25519:\n{v}", pem_block),
        ("en", "config dump:\ntls:\n  cert_file: /etc/ssl/app.crt\n  key: |\n{v}\n  verify: true", pem_block),
        ("en", '{{"type": "service_account", "project_id": "demo-123456", "private_key": "{v}\\n", '
               '"client_id": "1045"}}', pem_in_json),
        ("en", "The key got cut off when I pasted it:\n{v}", pem_truncated),
        ("en", "-- /etc/nginx/ssl/server.key --\n{v}\n-- end --", pem_block),
        ("en", "Why does openssl say 'bad decrypt' for this?\n{v}", pem_block),
        ("en", "ssh into prod with this key\n{v}\nthen run the migration", pem_truncated),
        ("en", 'private_key = "{v}"', pem_in_json),
        ("zh", "这是服务器上的私钥，帮我看看格式对不对：\n{v}", pem_block),
        ("zh", "配置导出如下：\n{v}\n以上是证书私钥", pem_block),
        ("zh", "粘贴的时候被截断了：\n{v}", pem_truncated),
        ("zh", 'service account 的 JSON：{{"private_key": "{v}"}}', pem_in_json),
        ("zh", "部署密钥放在这里了\n{v}", pem_block),
        ("zh", "openssl 解析这个私钥报错\n{v}\n怎么办", pem_block),
    ],
    "jwt": [
        ("en", "Cookie: session={v}", jwt),
        ("en", "The access token {v} expires in an hour.", jwt),
        ("en", "Decode this for me: {v}", jwt),
        ("en", "https://app.example.com/callback#id_token={v}&state=af0ifjsldkj", jwt),
        ("en", "localStorage.setItem('token', '{v}')", jwt),
        ("en", "The API returned {v} after login.", jwt),
        ("en", "jwt: {v}", jwt),
        ("en", "Why is {v} rejected with invalid signature?", jwt),
        ("zh", "登录后返回的 token 是 {v}", jwt),
        ("zh", "帮我解码这个 JWT：{v}", jwt),
        ("zh", "前端把{v}存在了 localStorage 里", jwt),
        ("zh", "这个令牌{v}一小时后过期", jwt),
        ("zh", "签名校验失败的 token：{v}", jwt),
        ("zh", "Cookie 里的 session={v}", jwt),
    ],
    "bearer_token": [
        ("en", "curl -H 'Authorization: Bearer {v}' https://api.example.com/v1/me", opaque_token),
        ("en", "Authorization: Bearer {v}", opaque_token),
        ("en", 'headers = {{"Authorization": "Bearer {v}"}}', opaque_token),
        ("en", "The agent should call the API with Bearer {v}.", opaque_token),
        ("en", "http GET api.example.com/orders 'Authorization:Bearer {v}'", opaque_token),
        ("en", "fetch(url, {{ headers: {{ Authorization: `Bearer {v}` }} }})", opaque_token),
        ("en", "Token for the staging gateway: Bearer {v}", opaque_token),
        ("en", '-H "authorization: bearer {v}"', opaque_token),
        ("zh", "请求头里加上 Authorization: Bearer {v} 就行", opaque_token),
        ("zh", "网关的访问令牌：Bearer {v}", opaque_token),
        ("zh", '用 curl 测试：curl -H "Authorization: Bearer {v}" https://api.example.com', opaque_token),
        ("zh", "他把 Bearer {v} 贴到了群里", opaque_token),
        ("zh", "接口鉴权用 Bearer {v}，有效期一天", opaque_token),
        ("zh", "authorization: Bearer {v}", opaque_token),
    ],
    "url_password": [
        ("en", "DATABASE_URL=postgres://app_user:{v}@db.internal:5432/orders", url_password),
        ("en", "Connect with mysql://root:{v}@10.0.3.12:3306/shop", url_password),
        ("en", "mongodb+srv://analytics:{v}@cluster0.example.mongodb.net/?retryWrites=true", url_password),
        ("en", "REDIS_URL=redis://:{v}@cache.internal:6379/0", url_password),
        ("en", "The broker is amqp://guest:{v}@rabbit.internal:5672/", url_password),
        ("en", "pip install --index-url https://deploy:{v}@pypi.example.com/simple mypkg", url_password),
        ("en", "Use jdbc:postgresql://reporter:{v}@10.1.2.3/warehouse for the BI tool.", url_password),
        ("en", "ftp://backup:{v}@files.example.org/nightly/", url_password),
        ("zh", "数据库连接串是postgres://admin:{v}@db.internal:5432/app", url_password),
        ("zh", "测试库：mysql://test:{v}@192.168.1.20:3306/demo，别连生产", url_password),
        ("zh", "缓存地址 redis://:{v}@10.0.0.8:6379", url_password),
        ("zh", "消息队列用 amqp://svc:{v}@mq.internal:5672/ 连接", url_password),
        ("zh", "私有源 https://ci:{v}@pypi.example.com/simple", url_password),
        ("zh", "MongoDB 连接：mongodb://reader:{v}@mongo-1.internal:27017/logs", url_password),
    ],
    "high_entropy_token": [
        ("en", "The internal API token is {v}", random_token),
        ("en", "SESSION_SECRET={v}", random_token),
        ("en", "webhook secret: {v}", random_token),
        ("en", "Use {v} as the HMAC signing key for callbacks.", random_token),
        ("en", "Here's the license key I was sent: {v}", random_token),
        ("en", 'api_key: "{v}"', random_token),
        ("en", "The vendor portal gave me this client secret {v}, save it.", random_token),
        ("en", "X-Api-Token: {v}", random_token),
        ("zh", "内部服务的令牌是{v}", random_token),
        ("zh", "回调签名密钥：{v}", random_token),
        ("zh", "供应商给的 client secret 是 {v}", random_token),
        ("zh", "会话密钥 SESSION_SECRET={v}", random_token),
        ("zh", "授权码{v}，请妥善保存", random_token),
        ("zh", "接口令牌 {v} 只在测试环境用", random_token),
    ],
    "email": [
        ("en", "You can reach me at {v} after 6pm.", email),
        ("en", "The customer's email is {v}; send the invoice there.", email),
        ("en", "cc: {v}", email),
        ("en", "Reply-To: <{v}>", email),
        ("en", "Contact: mailto:{v}", email),
        ("en", "Sign-up failed for {v} (duplicate account).", email),
        ("en", "Forward the logs to {v}.", email),
        ("en", "My work address changed to {v}", email),
        ("zh", "我的邮箱是{v}，有事发邮件", email),
        ("zh", "客户邮箱：{v}", email),
        ("zh", "请把发票寄到 {v}", email),
        ("zh", "联系人王经理，邮件{v}", email),
        ("zh", "注册失败的账号：{v}", email),
        ("zh", "抄送给{v}就行", email),
    ],
    "phone": [
        ("en", "Call me at {v} if the deploy breaks.", us_phone),
        ("en", "Customer phone: <a href=\"tel:{v}\">call</a>", us_phone_dialable),
        ("en", "Her number is {v}, text before calling.", us_phone),
        ("en", "Support hotline {v} (weekdays).", either(us_phone, intl_phone)),
        ("en", "Update my contact number to {v}.", us_phone),
        ("en", "Emergency contact: John, {v}", us_phone),
        ("en", "My Shanghai number is {v}.", cn_mobile),
        ("en", "The London office is at {v}.", intl_phone),
        ("zh", "我的手机号是{v}", cn_mobile),
        ("zh", "我的手机号是 {v}，白天打", cn_mobile),
        ("zh", "联系电话：{v}", cn_landline),
        ("zh", "快递员电话{v}，到了会打", cn_mobile),
        ("zh", "有事打我电话 {v}", cn_mobile),
        ("zh", "办公室座机 {v}，分机 203", cn_landline),
    ],
    "card_number": [
        ("en", "Charge the order to card {v}, expiry 09/27.", card),
        ("en", "My card number is {v}", card),
        ("en", "card_number: {v}", card),
        ("en", "The refund went to {v}.", card),
        ("en", "Payment failed for {v}, please retry.", card),
        ("en", "Save {v} as my default card.", card),
        ("en", "Customer read out the card number {v} over the phone.", card),
        ("en", "CC {v} exp 11/26 cvv 123", card),
        ("zh", "我的银行卡号是{v}", card),
        ("zh", "卡号：{v}，开户行招商银行", card),
        ("zh", "退款退到 {v} 这张卡", card),
        ("zh", "信用卡 {v} 扣款失败", card),
        ("zh", "请把工资打到{v}", card),
        ("zh", "绑定的银行卡 {v} 已过期", card),
    ],
    "national_id": [
        ("en", "SSN: {v}", ssn_named),
        ("en", "My social security number is {v}.", ssn_named),
        ("en", "Employee tax form lists {v} as the SSN.", ssn_named),
        ("en", "Verify identity with SSN {v}", ssn_named),
        ("en", "The applicant's Chinese ID is {v}.", cn_id),
        ("en", "ssn={v}", ssn_named),
        ("en", "Passport pending; resident ID {v} for now.", cn_id),
        ("en", "W-2 shows {v}.", ssn),
        ("zh", "身份证号{v}", cn_id),
        ("zh", "我的身份证号码是 {v}，帮我填到表里", cn_id),
        ("zh", "乘机人：张伟，证件号 {v}", cn_id),
        ("zh", "实名认证用的身份证：{v}", cn_id),
        ("zh", "他的美国社会安全号是 {v}", ssn_named),
        ("zh", "入住登记 身份证 {v}", cn_id),
    ],
    "iban": [
        ("en", "Invoice note: please pay to IBAN {v} by the 30th.", iban_value),
        ("en", "IBAN: {v}", iban_value),
        ("en", "Wire the deposit to {v} (Deutsche Bank).", iban_value),
        ("en", "Supplier changed their bank details to {v}", iban_value),
        ("en", "Beneficiary account {v}, BIC DEUTDEFF", iban_value),
        ("en", "Refund to iban {v} please.", iban_value),
        ("en", "SEPA mandate for {v} signed.", iban_value),
        ("en", "The payroll file lists {v} for Anna.", iban_value),
        ("zh", "发票备注：请汇款至 IBAN {v}", iban_value),
        ("zh", "供应商的银行账户：{v}", iban_value),
        ("zh", "欧洲客户的 IBAN 是{v}", iban_value),
        ("zh", "押金打到{v}，收款人 Hans", iban_value),
        ("zh", "退款账户 {v}", iban_value),
        ("zh", "工资单上写的 IBAN：{v}", iban_value),
    ],
}


# ---------------------------------------------------------------- look-alikes

def failing_luhn(rng: random.Random) -> str:
    digits = card_digits(rng)
    wrong = str((int(digits[-1]) + rng.randint(1, 9)) % 10)
    return format_card(rng, digits[:-1] + wrong)


def failing_ric(rng: random.Random) -> str:
    digits = ric_digits(rng)
    right = digits[-1]
    return digits[:-1] + rng.choice([c for c in "0123456789X" if c != right])


def _failing_luhn_digits(rng: random.Random, first: str, length: int) -> str:
    # An order number that happens to pass Luhn is a card number to anyone who reads it: not a look-alike.
    while True:
        digits = rng.choice(first) + chars(rng, DIGITS, length - 1)
        if not luhn.is_valid(digits):
            return digits


def order_number(rng: random.Random) -> str:
    kind = rng.randrange(3)
    if kind == 0:
        return _failing_luhn_digits(rng, "123", rng.choice([18, 19]))
    if kind == 1:
        return _failing_luhn_digits(rng, "23", rng.choice([12, 13]))
    return f"{rng.randint(24, 25)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}-{chars(rng, DIGITS, 15)}"


def amazon_order(rng: random.Random) -> str:
    return f"{rng.choice(['111', '112', '113', '114'])}-{chars(rng, DIGITS, 7)}-{chars(rng, DIGITS, 7)}"


def invoice_number(rng: random.Random) -> str:
    return rng.choice([f"INV-{rng.randint(2019, 2025)}-{rng.randint(1, 99999):05d}",
                       f"PO{rng.randint(10**7, 10**8 - 1)}", f"#{rng.randint(1000, 999999)}"])


def tracking_number(rng: random.Random) -> str:
    return rng.choice([
        "SF" + chars(rng, DIGITS, 12), "YT" + chars(rng, DIGITS, 13), "JT" + chars(rng, DIGITS, 13),
        rng.choice(["73", "75", "78"]) + chars(rng, DIGITS, 10),
        "1Z" + chars(rng, UPPER + DIGITS, 6) + chars(rng, DIGITS, 10),
        group("9400" + chars(rng, DIGITS, 18), (4, 4, 4, 4, 4, 2), " "),
        chars(rng, "123456789", 1) + chars(rng, DIGITS, 11),
    ])


def moment(rng: random.Random) -> str:
    when = datetime.datetime(2020, 1, 1) + datetime.timedelta(minutes=rng.randint(0, 3_000_000))
    return rng.choice([when.strftime("%Y-%m-%d %H:%M"), when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       when.strftime("%d/%m/%Y"), f"{when.year}年{when.month}月{when.day}日 {when.hour}:{when.minute:02d}",
                       when.strftime("%Y%m%d"), when.strftime("%B %d, %Y at %I:%M %p"),
                       when.strftime("%Y-%m-%d %H:%M:%S") + f".{rng.randint(0, 999):03d}+08:00",
                       when.strftime("%Y%m%d%H%M%S")])


def epoch(rng: random.Random) -> str:
    seconds = rng.randint(1_500_000_000, 1_800_000_000)
    return str(seconds) if rng.random() < 0.5 else str(seconds * 1000 + rng.randint(0, 999))


def price(rng: random.Random) -> str:
    amount = rng.randint(100, 50_000_000) / 100
    return rng.choice([f"${amount:,.2f}", f"¥{amount:,.2f}", f"€{amount:,.2f}".replace(",", " "), f"{amount:.2f} 元",
                       f"USD {int(amount):,}", f"{int(amount)}元", f"RMB {amount:,.2f}"])


def version(rng: random.Random) -> str:
    major, minor, patch = rng.randint(0, 30), rng.randint(0, 40), rng.randint(0, 200)
    return rng.choice([f"v{major}.{minor}.{patch}", f"{major}.{minor}.{patch}-rc.{rng.randint(1, 5)}",
                       f"Python 3.{rng.randint(8, 13)}.{rng.randint(0, 12)}",
                       f"Chrome {rng.randint(100, 130)}.0.{rng.randint(4000, 7000)}.{rng.randint(10, 200)}",
                       f"{major}.{minor}.{patch}+build.{rng.randint(1000, 99999)}",
                       f"gcc {rng.randint(9, 14)}.{rng.randint(1, 3)}.0-{rng.randint(1, 9)}ubuntu{rng.randint(1, 4)}"])


def ip_address(rng: random.Random) -> str:
    octets = ".".join(str(rng.randint(1, 254)) for _ in range(4))
    return rng.choice([octets, f"{octets}:{rng.choice([22, 443, 5432, 6379, 8080])}",
                       f"10.{rng.randint(0, 255)}.0.0/16",
                       f"2001:db8:{rng.randint(0, 0xffff):x}::{rng.randint(0, 0xffff):x}:{rng.randint(0, 0xffff):x}"])


def uuid_value(rng: random.Random) -> str:
    h = chars(rng, HEX, 32)
    value = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{rng.choice('89ab')}{h[17:20]}-{h[20:]}"
    return value.upper() if rng.random() < 0.25 else value


def git_sha(rng: random.Random) -> str:
    return chars(rng, HEX, rng.choice([7, 8, 12, 40, 40]))


def digest(rng: random.Random) -> str:
    return chars(rng, HEX, rng.choice([32, 64, 64])) if rng.random() < 0.8 else chars(rng, HEX.upper()[:16], 64)


SHORT_TEXTS = ["hello world", "admin", "config v2", "see you at 5", "ok", "test-user", "用户名", "nightly build",
               "yes please", "build #42", "draft", "配置文件", "retry later", "lunch?"]


def short_base64(rng: random.Random) -> str:
    return base64.b64encode(rng.choice(SHORT_TEXTS).encode()).decode()


CODE_WORDS = ["user", "profile", "session", "handler", "request", "response", "memory", "tenant", "search", "index",
              "cache", "retry", "policy", "content", "detector", "parse", "render", "update", "delete", "create",
              "stream", "window", "digest", "batch", "worker", "queue", "event", "config", "loader", "validator"]
CODE_ACRONYMS = ["HTTP", "JSON", "OAuth2", "UTF8", "S3", "V2", "V3", "SQL", "API", "IPv6", "SHA256", "RFC3339"]


def _words(rng: random.Random) -> list[str]:
    words = [rng.choice(CODE_WORDS) for _ in range(rng.randint(3, 6))]
    words.insert(rng.randrange(len(words) + 1), rng.choice(CODE_ACRONYMS))
    return words


def camel_case(rng: random.Random) -> str:
    words = _words(rng)
    name = words[0].lower() + "".join(w if w.isupper() or w[0].isupper() else w.capitalize() for w in words[1:])
    return name[0].upper() + name[1:] if rng.random() < 0.4 else name


def snake_case(rng: random.Random) -> str:
    name = "_".join(w.lower() for w in _words(rng)) + (f"_{rng.randint(1, 500)}" if rng.random() < 0.4 else "")
    return name.upper() if rng.random() < 0.3 else name


def sk_word(rng: random.Random) -> str:
    return rng.choice(["task-list", "risk-score-v2", "desk-booking-service", "flask-sqlalchemy", "kiosk-mode",
                       "disk-usage-report", "ask-the-team", "task-list-renderer-component", "mask-sensitive-fields",
                       "whisk-ingredients", "tsk-tsk"])


def service_name(rng: random.Random) -> str:
    return rng.choice(["the nightly export", "the billing job", "the search reindex", "the v2 migration", "checkout"])


def bearer_phrase(rng: random.Random) -> str:
    return rng.choice(["Bearer <token>", "Bearer YOUR_ACCESS_TOKEN", "Authorization: Bearer $API_TOKEN",
                       "Bearer ${TOKEN}", "Bearer {{token}}", "Authorization: Bearer <your-api-key>"])


def plain_url(rng: random.Random) -> str:
    return rng.choice([
        f"https://github.com/acme/infra/commit/{chars(rng, HEX, 40)}",
        f"https://docs.google.com/document/d/1{chars(rng, B64URL, 43)}/edit",
        f"https://docs.python.org/3/library/{rng.choice(['re', 'json', 'asyncio', 'base64'])}.html",
        f"https://example.com/search?q={rng.choice(CODE_WORDS)}&page={rng.randint(1, 20)}",
        f"https://www.youtube.com/watch?v={chars(rng, B64URL, 11)}",
        f"https://github.com/acme/infra/pull/{rng.randint(1, 9999)}",
        f"https://s3.console.aws.amazon.com/s3/buckets/acme-logs-{rng.randint(2019, 2025)}?region=us-east-1",
        f"https://en.wikipedia.org/wiki/{rng.choice(['Luhn_algorithm', 'Base64', 'IBAN', 'JSON_Web_Token'])}",
    ])


def at_mention(rng: random.Random) -> str:
    name = rng.choice(NAMES)[0]
    return rng.choice([f"@{name}", f"{name}@", f"lodash@4.17.{rng.randint(1, 21)}",
                       f"root@10.0.0.{rng.randint(2, 250)}",
                       f"deploy@web-0{rng.randint(1, 9)}:~$", "git@github.com:acme/infra.git", f"{name}@localhost",
                       f"@types/node@{rng.randint(16, 22)}.0.0"])


def file_path(rng: random.Random) -> str:
    name = rng.choice(NAMES)[0]
    return rng.choice([
        f"/home/{name}/projects/memplane/server/memplane_server/core/{rng.choice(CODE_WORDS)}.py",
        f"C:\\Users\\{name.capitalize()}\\AppData\\Local\\Temp\\report_{rng.randint(1, 99)}.xlsx",
        f"s3://acme-data/Data{rng.randint(2019, 2025)}/Q{rng.randint(1, 4)}/{snake_case(rng).lower()}.parquet",
        f"src/components/{camel_case(rng)}/index.tsx",
        f"/var/lib/docker/overlay2/{chars(rng, HEX, 64)}/merged",
    ])


def public_key(rng: random.Random) -> str:
    if rng.random() < 0.5:
        blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + rng.randbytes(32)
        return f"ssh-ed25519 {base64.b64encode(blob).decode()} {rng.choice(NAMES)[0]}@laptop"
    label = rng.choice(["CERTIFICATE", "PUBLIC KEY"])
    return "\n".join([f"-----BEGIN {label}-----", *_pem_lines(rng), f"-----END {label}-----"])


def placeholder(rng: random.Random) -> str:
    return rng.choice(["AKIAXXXXXXXXXXXXXXXX", "sk_test_xxxxxxxxxxxxxxxxxxxxxxxx", "sk-...", "YOUR_API_KEY",
                       "postgres://user:****@db.internal/app", "postgres://user:${DB_PASSWORD}@db:5432/app",
                       "ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", "<paste your key here>",
                       "xoxb-your-bot-token", "sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"])


def isbn(rng: random.Random) -> str:
    group_ = rng.choice(["7", "0", "1"])
    publisher = chars(rng, DIGITS, 3)
    title = chars(rng, DIGITS, 8 - len(publisher))
    body = "978" + group_ + publisher + title
    check = (10 - sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(body)) % 10) % 10
    return f"978-{group_}-{publisher}-{title}-{check}"


def cn_misc_number(rng: random.Random) -> str:
    return rng.choice([
        f"学号 {rng.randint(2015, 2024)}{chars(rng, DIGITS, 6)}", f"工号 E{chars(rng, DIGITS, 6)}",
        f"邮编 {rng.choice(['100', '200', '510', '310'])}{chars(rng, DIGITS, 3)}",
        f"股票代码 {rng.choice(['600', '000', '300'])}{chars(rng, DIGITS, 3)}", f"G{rng.randint(1, 9999)} 次列车",
        f"航班 MU{rng.randint(1000, 9999)}", f"{rng.randint(2, 30)}楼{rng.randint(1, 30):02d}室",
        f"车牌 沪A{chars(rng, DIGITS + 'DF', 5)}", f"身高 {rng.randint(150, 195)}cm 体重 {rng.randint(45, 100)}kg",
        f"第 {rng.randint(1, 4)} 季度营收 {rng.randint(100, 9999)} 万元",
    ])


def big_number(rng: random.Random) -> str:
    return rng.choice([f"{rng.randint(10**8, 10**10):,}", f"{rng.random() * 10:.14f}", f"6.022{rng.randint(10, 99)}e23",
                       f"{rng.randint(1, 99)}.{chars(rng, DIGITS, 12)}", f"HTTP {rng.choice([200, 404, 429, 503])}"])


def hardware_id(rng: random.Random) -> str:
    return rng.choice([":".join(chars(rng, HEX, 2) for _ in range(6)), "#" + chars(rng, HEX, 6),
                       f"0x{chars(rng, HEX, 8)}", chars(rng, UPPER + DIGITS, 4) + "-" + chars(rng, UPPER + DIGITS, 4)])


def imei(rng: random.Random) -> str:
    body = rng.choice(["35", "86", "01"]) + chars(rng, DIGITS, 12)
    return body + luhn.calc_check_digit(body)


def cloud_id(rng: random.Random) -> str:
    account = chars(rng, DIGITS, 12)
    return rng.choice([f"arn:aws:iam::{account}:role/Deploy", f"AWS account {account}",
                       f"api-{chars(rng, HEX, 9)}-{chars(rng, LOWER + DIGITS, 5)}", f"sha256:{chars(rng, HEX, 64)}",
                       f"projects/demo-{rng.randint(100000, 999999)}/locations/us-central1"])


def masked(rng: random.Random) -> str:
    last4 = chars(rng, DIGITS, 4)
    return rng.choice([f"**** **** **** {last4}", f"4111 **** **** {last4}", f"138****{last4}", f"尾号{last4}",
                       f"ending in {last4}", f"***-**-{last4}", f"110101********{last4}"])


def zip_code(rng: random.Random) -> str:
    return f"{rng.randint(10000, 99999)}-{rng.randint(1000, 9999)}"


def nothing(rng: random.Random) -> str:
    return ""


# (value, English templates, Chinese templates, lines per language): every template is used in turn.
NEGATIVE_KINDS: list[tuple[Make, list[str], list[str], int, int]] = [
    (failing_luhn, ["Shipment reference {v} is on hold.", "The form rejected {v} as an invalid card number.",
                    "Batch serial {v} belongs to the March run."],
     ["批次号 {v} 已入库", "这个编号 {v} 校验不通过", "设备序列号{v}需要登记"], 5, 5),
    (failing_ric, ["Customs declaration no. {v} was filed.", "Ledger entry {v} needs review."],
     ["报关单号 {v} 已放行", "流水号{v}对不上", "合同编号 {v} 已归档"], 4, 6),
    (order_number, ["Order {v} shipped yesterday.", "Please look up order number {v}."],
     ["订单号 {v} 已发货", "淘宝订单{v}申请退款", "我的订单编号是{v}", "京东订单 {v} 明天送达"], 5, 8),
    (amazon_order, ["Amazon order #{v} was refunded.", "Track order {v} please."], [], 5, 0),
    (invoice_number, ["Invoice {v} is overdue.", "Attach {v} to the expense report."],
     ["发票号 {v} 已报销"], 4, 3),
    (tracking_number, ["Tracking number {v}, arriving Friday.", "The parcel {v} is stuck in customs."],
     ["快递单号 {v}", "顺丰单号{v}已签收", "中通快递 {v} 派送中"], 6, 8),
    (moment, ["Meeting moved to {v}.", "Last login: {v}", "Backup finished at {v}"],
     ["会议改到{v}", "上次登录时间 {v}", "截止日期：{v}"], 7, 7),
    (epoch, ["created_at: {v}", "The event timestamp is {v}."], ["时间戳 {v}", "日志里的时间是{v}"], 3, 3),
    (price, ["The quote came to {v}.", "Monthly cost is {v} after the discount."],
     ["总价 {v}", "报价{v}，含税", "本月金额 {v}"], 5, 6),
    (version, ["Upgraded to {v} yesterday.", "The bug only reproduces on {v}."],
     ["升级到 {v} 之后就好了", "当前版本 {v}"], 6, 5),
    (ip_address, ["The service listens on {v}.", "Block {v} at the firewall."],
     ["服务器地址 {v}", "把 {v} 加到白名单"], 5, 5),
    (uuid_value, ["request_id={v}", "Memory {v} was merged into its duplicate."], ["请求 ID：{v}", "任务 {v} 已完成"], 5, 4),
    (git_sha, ["Fixed in commit {v}.", "git revert {v}"], ["回滚到提交 {v}", "这个问题在 {v} 里修了"], 5, 4),
    (digest, ["sha256: {v}", "Checksum {v} matches the release."], ["文件校验和 {v}"], 5, 3),
    (short_base64, ["The header value {v} decodes to plain text.", "echo {v} | base64 -d"],
     ["这段 base64 {v} 解出来是普通文本"], 5, 3),
    (camel_case, ["Rename {v} before the release.", "The stack trace points at {v}()."],
     ["函数 {v} 抛了异常", "把 {v} 改成异步的"], 6, 5),
    (snake_case, ["Set {v} to true in the config.", "The column {v} is nullable."], ["配置项 {v} 默认关闭"], 5, 3),
    (sk_word, ["Open the {v} component.", "We pinned {v} to the last release."], ["{v} 模块需要重构"], 4, 3),
    (service_name, ["I hate being the bearer of bad news, but {v} failed again.",
                    "Bearer bonds came up while we discussed {v}.", "The bearer of this note may collect {v} results."],
     ["我不想当坏消息的 bearer，但是 {v} 又失败了"], 3, 2),
    (bearer_phrase, ["In the docs, replace {v} with your own token.", "Every request sends {v}."],
     ["文档里写的是 {v}，换成自己的令牌"], 4, 3),
    (plain_url, ["See {v} for details.", "The fix is described at {v}"], ["参考链接：{v}", "文档在 {v}"], 7, 6),
    (at_mention, ["Ping {v} about the outage.", "Then I ran ssh {v} and restarted the worker."],
     ["记得提醒 {v} 看一下", "用 {v} 登录后重启服务"], 5, 5),
    (file_path, ["The log is at {v}.", "Open {v} and fix the import."], ["日志文件在 {v}", "修改 {v} 里的配置"], 5, 5),
    (public_key, ["Add this to authorized_keys:\n{v}", "The server's certificate:\n{v}"],
     ["公钥如下，可以公开：\n{v}"], 3, 2),
    (placeholder, ["Set the key in .env, e.g. {v}.", "The README shows {v} as an example."],
     ["示例配置里写的是 {v}", "把 {v} 换成你自己的"], 5, 4),
    (isbn, ["The book's ISBN is {v}.", "Order another copy of ISBN {v}."], ["这本书的 ISBN 是 {v}"], 3, 3),
    (cn_misc_number, [], ["他的{v}", "登记信息：{v}", "备注 {v}"], 0, 9),
    (big_number, ["The dataset has {v} rows.", "The constant printed as {v}."], ["结果是 {v}"], 3, 3),
    (hardware_id, ["The device {v} dropped off the network.", "Use colour {v} for the header."],
     ["设备 {v} 掉线了"], 3, 2),
    (imei, ["The phone's IMEI is {v}.", "Device {v} failed to register."], ["手机 IMEI 号 {v}"], 3, 3),
    (cloud_id, ["The role is {v}.", "Deploy failed for {v}."], ["资源 {v} 已创建", "部署到 {v} 失败"], 4, 4),
    (masked, ["Paid with the card {v}.", "The form shows {v} only."], ["用{v}的卡付款", "系统只显示 {v}"], 4, 4),
    (zip_code, ["Ship to ZIP {v}.", "The billing ZIP is {v}."], [], 3, 0),
    (nothing, ["The secret to good ramen is the broth.", "Rotate the API key every 90 days per policy.",
               "Set OPENAI_API_KEY in your environment, never in code.",
               "Private key handling is documented in SECURITY.md.", "The token budget is the limiting factor.",
               "supercalifragilisticexpialidocious and antidisestablishmentarianism are long words."],
     ["密钥要定期轮换，不要写进代码。", "别把私钥提交到仓库。", "用户喜欢喝无糖的美式咖啡。", "下周三下午开项目复盘会。",
      "他说密码已经改过了，让我们放心。"], 6, 5),
]


def negatives(rng: random.Random) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for make, english, chinese, en_count, zh_count in NEGATIVE_KINDS:
        for lang, templates, count in (("en", english, en_count), ("zh", chinese, zh_count)):
            out.extend((lang, templates[i % len(templates)].format(v=make(rng))) for i in range(count))
    return out


def lines(seed: int = SEED) -> list[dict[str, str | None]]:
    rng = random.Random(seed)
    out: list[dict[str, str | None]] = [
        {"text": template.format(v=(value := make(rng))), "lang": lang, "detector": detector, "secret": value}
        for detector, templates in POSITIVES.items() for lang, template, make in templates]
    out += [{"text": text, "lang": lang, "detector": None, "secret": None} for lang, text in negatives(rng)]
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "content_corpus.jsonl")
    args = parser.parse_args(argv)
    corpus = lines()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in corpus), encoding="utf-8")
    for label, part in (("positives", [c for c in corpus if c["detector"]]),
                        ("negatives", [c for c in corpus if not c["detector"]])):
        print(f"{label}: {len(part)} ({sum(c['lang'] == 'zh' for c in part)} zh)")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
