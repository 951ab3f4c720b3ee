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
import json
import random
import sys
from pathlib import Path

from corpus_lookalikes import negatives
from corpus_values import (
    SEED,
    Make,
    anthropic_key,
    aws_key_id,
    aws_secret,
    card,
    cn_id,
    cn_landline,
    cn_mobile,
    email,
    gcp_key,
    github_token,
    iban_value,
    intl_phone,
    jwt,
    opaque_token,
    openai_key,
    pem_block,
    pem_in_json,
    pem_truncated,
    random_token,
    slack_token,
    slack_webhook,
    ssn,
    ssn_named,
    stripe_key,
    url_password,
    us_phone,
    us_phone_dialable,
)

ROOT = Path(__file__).resolve().parent.parent

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
