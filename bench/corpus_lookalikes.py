"""The look-alikes of the content corpus (bench/content_corpus.py): values that fail the rules by
construction (a Luhn-failing card, a wrong check digit) or are no secret at all (hashes, UUIDs,
versions, URLs, identifiers), each in English and Chinese sentences."""
from __future__ import annotations

import base64
import datetime
import random

from corpus_values import (
    B64URL,
    DIGITS,
    HEX,
    LOWER,
    NAMES,
    UPPER,
    Make,
    card_digits,
    chars,
    format_card,
    group,
    pem_lines,
    ric_digits,
)
from stdnum import luhn


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
    return "\n".join([f"-----BEGIN {label}-----", *pem_lines(rng), f"-----END {label}-----"])


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
