"""The labelled corpus of secret redaction: fake secrets written the ways people paste them,
and ordinary turns that must come back unchanged.

Every value is made up here, from a seeded generator, in the shape of its provider's format
(prefix, alphabet, length, sometimes one character shorter or longer than the canonical
length): none is a real credential. ``secrets(part)`` gives the labelled secrets of one part:
``tuned`` (the part the rules of ``memstream.text.redaction`` were tuned on) or ``heldout``
(other ways of writing them and other near-formats, with another seed, kept apart from the
tuning). ``ordinary()`` gives the ordinary turns: chat prose, technical prose that uses the
words key, token, secret and password innocently, code with git SHAs, UUIDs and hashes,
base64 images, URLs without credentials, logs, command lines (``-p 8080:80``, ``-u 1000:1000``),
configuration without secrets, and other scripts.

``leaked(out, secret)`` says whether a redacted text still holds the secret or a piece of it
(any 10 characters in a row, after removing zero-width characters and mapping look-alikes
to ASCII, so a secret split by a zero-width space or wrapped over two lines counts as kept
if either half survives).

``tests/text/corpus/make_corpus.py`` writes the corpus files the tests read;
``memstream bench redaction`` measures on the same texts.
"""

from __future__ import annotations

import base64
import json
import random
import string
import unicodedata
import uuid
from typing import Any, Callable

__all__ = ["secrets", "ordinary", "ordinary_digests", "leaked", "normalise", "PARTS"]

PARTS = ("tuned", "heldout")

_ZW = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"))
# Cyrillic and Greek letters that look like Latin ones.
_LOOKALIKE = str.maketrans(
    "аеорсухіјѕԁмтнвкАЕОРСУХІЈЅМТНВКΑΒΕΖΗΙΚΜΝΟΡΤΥΧοαικνρτυχ",
    "aeopcyxijsdmtHBkAEOPCYXIJSMTHBKABEZHIKMNOPTYXoaiknptux",
)


def normalise(text: str) -> str:
    """``text`` without zero-width characters, in NFKC, look-alikes mapped to ASCII."""
    return unicodedata.normalize("NFKC", text.translate(_ZW)).translate(_LOOKALIKE)


def leaked(out: str, secret: str, source: str = "", window: int = 10) -> bool:
    """Whether ``out`` still holds ``secret``, or any ``window`` characters of it in a row
    (after ``normalise``; line breaks and indentation inside the secret split it into
    pieces, each checked). A piece that ``source`` (the text before redaction) holds
    outside the secret too is not a leak (``github_pat_…`` under a field named
    ``github_pat``)."""
    text = normalise(out)
    secret = normalise(secret)
    around = normalise(source).replace(secret, "\0")
    for piece in secret.split("\n"):
        piece = piece.strip()
        if not piece:
            continue
        if len(piece) <= window:
            if len(piece) >= 4 and piece in text and piece not in around:
                return True
            continue
        if any(w in text and w not in around for w in (piece[i : i + window] for i in range(len(piece) - window + 1))):
            return True
    return False


# --- values ----------------------------------------------------------------------------

_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"
_URL = _ALNUM + "_-"


class _Values:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def of(self, alphabet: str, n: int) -> str:
        # at least one digit, one upper and one lower where the alphabet has them, like real tokens
        while True:
            s = "".join(self.rng.choice(alphabet) for _ in range(n))
            classes = [
                c for c in (string.digits, string.ascii_uppercase, string.ascii_lowercase) if any(ch in alphabet for ch in c)
            ]
            if n < 12 or all(any(ch in c for ch in s) for c in classes):
                return s

    def alnum(self, n: int) -> str:
        return self.of(_ALNUM, n)

    def hex(self, n: int) -> str:
        while True:
            s = self.of(_HEX, n)
            if any(c.isalpha() for c in s) and any(c.isdigit() for c in s):
                return s

    def b64(self, n: int) -> str:
        return self.of(_B64, n)

    def url(self, n: int) -> str:
        return self.of(_URL, n)

    def digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + "".join(self.rng.choice(string.digits) for _ in range(n - 1))

    def near(self, n: int) -> int:
        """The canonical length, or one shorter or longer (a third of the time each)."""
        return n + self.rng.choice((-1, 0, 1))

    def password(self) -> str:
        words = [
            "hunter",
            "Summer",
            "dragon",
            "Tr0ub4dor",
            "correct",
            "Bl4ck",
            "monkey",
            "Sunsh1ne",
            "falcon",
            "Winter",
            "purple",
            "Kangar00",
            "orange",
            "Rocket",
            "maple",
            "Zebra",
        ]
        w = self.rng.choice(words)
        tail = self.rng.choice(["2", "!", "#1", "2024", "_x9", "@77", "$5", "99!", "&3", "%21"])
        mid = self.rng.choice(["", "-", ".", "_"]) + self.rng.choice(words).lower()
        return f"{w}{mid}{tail}" if self.rng.random() < 0.6 else w + tail

    def pgp_body(self) -> str:
        return "\n".join(self.b64(64) for _ in range(self.rng.randint(4, 8))) + "\n=" + self.b64(4)


# (kind, label people use, environment name, make the value)
_Provider = tuple[str, str, str, Callable[[_Values], str]]

PROVIDERS: list[_Provider] = [
    ("openai", "OpenAI API key", "OPENAI_API_KEY", lambda v: "sk-proj-" + v.url(v.near(48)) + "T3BlbkFJ" + v.url(20)),
    ("openai", "OpenAI key", "OPENAI_API_KEY", lambda v: "sk-" + v.alnum(v.near(48))),
    ("anthropic", "Anthropic key", "ANTHROPIC_API_KEY", lambda v: "sk-ant-api03-" + v.url(v.near(95)) + "AA"),
    ("github", "GitHub token", "GITHUB_TOKEN", lambda v: "ghp_" + v.alnum(v.near(36))),
    ("github", "GitHub OAuth token", "GH_TOKEN", lambda v: "gho_" + v.alnum(v.near(36))),
    ("github", "fine-grained PAT", "GITHUB_PAT", lambda v: "github_pat_11" + v.alnum(20) + "_" + v.alnum(v.near(59))),
    ("gitlab", "GitLab token", "GITLAB_TOKEN", lambda v: "glpat-" + v.url(v.near(20))),
    ("npm", "npm token", "NPM_TOKEN", lambda v: "npm_" + v.alnum(v.near(36))),
    ("sendgrid", "SendGrid key", "SENDGRID_API_KEY", lambda v: "SG." + v.url(22) + "." + v.url(v.near(43))),
    ("twilio", "Twilio API key", "TWILIO_API_KEY", lambda v: "SK" + v.hex(32)),
    ("twilio", "Twilio auth token", "TWILIO_AUTH_TOKEN", lambda v: v.hex(32)),
    (
        "discord",
        "Discord bot token",
        "DISCORD_TOKEN",
        lambda v: base64.b64encode(v.digits(18).encode()).decode().rstrip("=") + "." + v.url(6) + "." + v.url(v.near(38)),
    ),
    ("telegram", "Telegram bot token", "TELEGRAM_BOT_TOKEN", lambda v: v.digits(10) + ":AA" + v.url(v.near(33))),
    ("google_oauth", "Google client secret", "GOOGLE_CLIENT_SECRET", lambda v: "GOCSPX-" + v.url(v.near(28))),
    ("google_oauth", "Google access token", "GOOGLE_ACCESS_TOKEN", lambda v: "ya29.a0" + v.url(v.near(120))),
    ("google_oauth", "Google refresh token", "GOOGLE_REFRESH_TOKEN", lambda v: "1//0" + v.url(v.near(99))),
    ("google_api", "Google API key", "GOOGLE_API_KEY", lambda v: "AIza" + v.url(v.near(35))),
    ("slack", "Slack bot token", "SLACK_BOT_TOKEN", lambda v: f"xoxb-{v.digits(12)}-{v.digits(13)}-{v.alnum(v.near(24))}"),
    ("stripe", "Stripe secret key", "STRIPE_SECRET_KEY", lambda v: "sk_live_" + v.alnum(v.near(99))),
    ("stripe", "Stripe test key", "STRIPE_KEY", lambda v: "sk_test_" + v.alnum(v.near(24))),
    ("aws", "AWS access key id", "AWS_ACCESS_KEY_ID", lambda v: "AKIA" + v.of(_UPPER, v.near(16))),
    ("aws_secret", "AWS secret key", "AWS_SECRET_ACCESS_KEY", lambda v: v.b64(40)),
    ("huggingface", "Hugging Face token", "HF_TOKEN", lambda v: "hf_" + v.alnum(v.near(34))),
    ("mailgun", "Mailgun key", "MAILGUN_API_KEY", lambda v: "key-" + v.hex(32)),
    ("shopify", "Shopify token", "SHOPIFY_ACCESS_TOKEN", lambda v: "shpat_" + v.hex(32)),
    ("digitalocean", "DigitalOcean token", "DIGITALOCEAN_TOKEN", lambda v: "dop_v1_" + v.hex(64)),
    ("pypi", "PyPI token", "PYPI_TOKEN", lambda v: "pypi-AgEIcHlwaS5vcmc" + v.url(v.near(60))),
    ("vault", "Vault token", "VAULT_TOKEN", lambda v: "hvs." + v.url(v.near(24))),
    ("databricks", "Databricks token", "DATABRICKS_TOKEN", lambda v: "dapi" + v.hex(32)),
    ("groq", "Groq key", "GROQ_API_KEY", lambda v: "gsk_" + v.alnum(v.near(52))),
    ("generic_hex", "API key", "API_KEY", lambda v: v.hex(v.rng.choice((32, 40, 64)))),
    ("generic_b64", "secret", "APP_SECRET", lambda v: v.b64(v.rng.choice((24, 32, 44))) + "="),
    ("heroku", "Heroku API key", "HEROKU_API_KEY", lambda v: str(uuid.UUID(int=v.rng.getrandbits(128), version=4))),
]


# --- ways of writing a named value ----------------------------------------------------

_Carrier = Callable[[_Values, str, str, str], str]  # (values, label, env name, value) -> text


def _ROTATED(v: _Values, label: str, env: str, x: str) -> str:
    return f"I rotated it, the new one is {x}"


def _ALONE(v: _Values, label: str, env: str, x: str) -> str:
    return x


_TUNED_CARRIERS: list[_Carrier] = [
    lambda v, label, env, x: f"{env}={x}",
    lambda v, label, env, x: f"export {env}={x}",
    lambda v, label, env, x: f'export {env}="{x}"',
    lambda v, label, env, x: f"here's my {label}: {x}",
    lambda v, label, env, x: f"my {label} is {x}, can you check why it fails?",
    lambda v, label, env, x: f'{{"{env.lower()}": "{x}", "region": "us-east-1"}}',
    lambda v, label, env, x: f"config:\n  {env.lower()}: {x}\n  timeout: 30",
    lambda v, label, env, x: f"use `{x}` as the {label}",
    lambda v, label, env, x: f"{label}:\n```\n{x}\n```",
    lambda v, label, env, x: f"client = Client(api_key='{x}')",
    _ROTATED,
    _ALONE,
    lambda v, label, env, x: f"# .env\nDEBUG=false\n{env}={x}\nPORT=8000",
]

_CONTEXT_FREE = (_ROTATED, _ALONE)

_MORE_CARRIERS: list[_Carrier] = [
    lambda v, label, env, x: f'{env} = "{x}"  # TODO move to vault',
    lambda v, label, env, x: f"The {label} was {x} before the rotation.",
    lambda v, label, env, x: f"  - name: {env}\n    value: '{x}'",
    lambda v, label, env, x: f"docker run -e {env}={x} myimage:latest",
    lambda v, label, env, x: f"set {env.lower()} to {x} please",
    lambda v, label, env, x: f'<add key="{env}" value="{x}" />',
    lambda v, label, env, x: f"Failing request, {label} = {x}, status 401",
    lambda v, label, env, x: f'$env:{env} = "{x}"',
    lambda v, label, env, x: f"{env.lower()}={x} npm run deploy",
    lambda v, label, env, x: f"ok so the token I used is {x} (the {label})",
    lambda v, label, env, x: f'os.environ["{env}"] = "{x}"',
    lambda v, label, env, x: f"> {x}\nthat's the {label} from the dashboard",
]


_THIRD_CARRIERS: list[_Carrier] = [
    lambda v, label, env, x: f"{env}: {x}",
    lambda v, label, env, x: f"Can you debug this? {env.lower()} = '{x}' and it still says 401",
    lambda v, label, env, x: f"[default]\n{env.lower()} = {x}",
    lambda v, label, env, x: f"The {label} for prod is {x}",
    lambda v, label, env, x: f'settings.py:\n{env} = "{x}"',
    lambda v, label, env, x: f"heroku config:set {env}={x}",
    lambda v, label, env, x: f"in the .env: `{env}={x}`",
    lambda v, label, env, x: f'{{\n  "name": "ci",\n  "{env.lower()}": "{x}"\n}}',
    lambda v, label, env, x: f"pasting the {label} here so I don't lose it: {x}",
    lambda v, label, env, x: f"kubectl create secret generic app --from-literal={env}={x}",
    lambda v, label, env, x: f"new {label}: {x}",
    lambda v, label, env, x: f"```\n{x}\n```\nthat's my {label}",
]

_LAST_CARRIERS: list[_Carrier] = [
    lambda v, label, env, x: f'{env.lower()}: "{x}"',
    lambda v, label, env, x: f"secrets:\n  {env.lower()}: {x}",
    lambda v, label, env, x: f"ENV {env}={x}",
    lambda v, label, env, x: f"the {label} is `{x}`",
    lambda v, label, env, x: f"fetch(url, {{ headers: {{ '{env}': '{x}' }} }})",
    lambda v, label, env, x: f"gh secret set {env} --body {x}",
    lambda v, label, env, x: f"{env}={x} python bot.py",
    lambda v, label, env, x: f"oops I pasted my {label}: {x}",
    lambda v, label, env, x: f"{label.capitalize()} -> {x}",
    lambda v, label, env, x: f"| {env} | {x} |",
    lambda v, label, env, x: f"config.{env.lower()} = '{x}'",
    lambda v, label, env, x: f"why does {x} not work as my {label}?",
]

# Values with no shape of their own (hex, base64, a UUID): without a word around them they
# cannot be told from a hash or an id, by any detector, so they are written with one.
_SHAPELESS = {"Twilio auth token", "AWS secret key", "API key", "secret", "Heroku API key"}


def _named(v: _Values, carriers: list[_Carrier], count: int, part: str) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        kind, label, env, make = PROVIDERS[i % len(PROVIDERS)]
        x = make(v)
        at = (i // len(PROVIDERS) + i) % len(carriers)
        if label in _SHAPELESS:
            while carriers[at] in _CONTEXT_FREE:
                at = (at + 1) % len(carriers)
        carrier = carriers[at]
        out.append({"text": carrier(v, label, env, x), "secrets": [x], "kind": kind, "form": "named", "part": part})
    return out


# --- the shapes that are not "a name and a value" ---------------------------------------

# The templates of the special shapes, one list per variant: 0 and 1 are tuned, 2 is held out.
_URL_TEXT = ("the cache url is {url}", "DATABASE_URL={url}?sslmode=require", 'REDIS_URL: "{url}"', "sqlalchemy.url = {url}")
_URL_TEXT_ALT = (
    "connect with `{url}` and retry",
    "connect with `{url}` and retry",
    "failing on {url} since this morning",
    "why does `psql {url}` hang?",
)
_CONN = (
    "Server=sql01;Database=app;User Id=sa;Password={p};TrustServerCertificate=true",
    "jdbc:postgresql://db:5432/app?user=report&password={p}&ssl=true",
    "Host=pg;Username=app;Pwd={p};Database=orders",
    "Data Source=tcp:sql.example.com;Initial Catalog=crm;User ID=crm;Password='{p}'",
)
_PROSE = (
    [
        "the password is {p}",
        "my db password was {p} but I changed it",
        "Password for the staging box: {p}",
        "pw: {p}",
        "the wifi passphrase is {p}",
    ],
    [
        "use password {p} for now",
        "the root password on the NAS is {p}",
        "login is admin / password {p}",
        "The passcode was {p}, don't share it",
        "credentials: admin {p}",
    ],
    [
        "new password: {p}",
        "I set the password to {p} yesterday",
        "the vpn password is now {p}",
        "admin password = {p}",
        "Passphrase for the key: '{p}'",
    ],
    [
        "password {p} works for both accounts",
        "the pass for the router was {p}",
        "Password: {p}\nUsername: maria",
        "my pwd is {p} lol",
        "PIN/password: {p}",
    ],
)
_GLUED = (
    ["PGPASSWORD={p} psql -h db -U app", "DBPASSWORD={p}", "REDISPASS={p}"],
    ["MYSQLPWD={p}", "SMTPPASSWORD='{p}'", "ADMINPASS={p} ./setup.sh"],
    ["RABBITPASSWORD={p}", "KEYSTOREPASS={p} gradle build", 'LDAPPWD="{p}"'],
    ["MONGOPASSWORD={p} node seed.js", "export SQLPASS='{p}'", "FTPPASSWORD: {p}"],
)
_FLAGS = (
    ["mysql -u root -p{p} app", "curl -u admin:{p} https://api.example.com/v1/items", "sshpass -p '{p}' ssh deploy@web1"],
    ["mysqldump -uroot -p{p} shop > shop.sql", "curl --user ci:{p} https://ci.example.com/job", "redis-cli -h cache -a {p} ping"],
    [
        "mariadb -h db -u app -p'{p}' -e 'show tables'",
        "curl -s -u deploy:{p} -X POST https://hooks.example.com/run",
        "redis-cli -a '{p}' --no-auth-warning info",
    ],
    [
        "mysql --host=db -uapp -p{p} < dump.sql",
        "curl -fsS -u 'bot:{p}' https://api.example.com/health",
        "sshpass -p {p} scp backup.tgz ops@10.0.0.5:/srv",
    ],
)
_BARE = (
    ["the key is {h}", "token: {b}", "signing key `{h}`", "API token {h}"],
    ["key={b}", "webhook secret: {h}", "the auth token was {b}", "encryption key -> {h}"],
    ["HMAC key: {h}", "session secret is `{b}`", "token={h}", "the master key was {b}"],
    ["app key {b}", '"secret": "{h}"', "X-Api-Key: {h}", "the token you need is {b}"],
)
_AWS = (
    "Access key ID,Secret access key\n{kid},{sec}",
    "new keys for the ci user: {kid} / {sec}",
    "aws configure gave me {kid} and {sec}",
    "[default]\naws_access_key_id={kid}\naws_secret_access_key={sec}",
)
_AWS_ALONE = ("aws secret is {sec}", "the AWS one: {sec}", "AWS secret: {sec}", "secret for aws = {sec}")
_PEM: tuple[list[str], ...] = (
    ["RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK", "private key", "EC PRIVATE KEY"],
    ["ENCRYPTED PRIVATE KEY", "pgp private key block", "DSA PRIVATE KEY", "Private Key"],
    ["Openssh Private Key", "PRIVATE KEY", "rsa private key"],
    ["EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "Pgp Private Key Block"],
)
_JWT = (
    ["Authorization: Bearer {t}", "jwt={t}", "decode this: {t}"],
    ["Authorization: Bearer {t}", "jwt={t}", "decode this: {t}"],
    ["cookie session={t}; Path=/", "the id_token is {t}", '{{"access_token": "{t}"}}'],
    ['curl -H "Authorization: Bearer {t}" https://api.example.com/me', "token expired? {t}", "JWT:\n{t}"],
)
_WRAP = ("the token:\n{a}\n{b}\nplease revoke it", "key {a}\n  {b}", "GITHUB_TOKEN={a}\n{b}", "> {a}\n> {b}")
_ODD = ("token {zw} (copied from the doc)", "token {zw} (copied from the doc)", "my key: {zw}", "{zw} is the one")
_ODD_LOOK = ("here: {look}", "here: {look}", "use {look} for the bot", "token={look}")


def _special(v: _Values, variant: int, part: str) -> list[dict[str, Any]]:
    rng = v.rng
    items: list[tuple[str, str, list[str]]] = []  # kind, text, secrets

    # credentials in URLs and connection strings
    for scheme, port in (
        ("postgres", 5432),
        ("redis", 6379),
        ("mongodb+srv", 0),
        ("amqp", 5672),
        ("mysql", 3306),
        ("rediss", 6380),
        ("https", 0),
        ("postgresql", 5432),
    ):
        pw = v.password() if rng.random() < 0.5 else v.alnum(20)
        user = "" if scheme.startswith("redis") else rng.choice(["admin", "app", "svc_billing", "x-access-token"])
        host = rng.choice(["db.internal", "cache.prod.example.com", "10.0.3.17", "cluster0.ab1cd.mongodb.net"])
        where = f"{host}:{port}" if port else host
        url = f"{scheme}://{user}:{pw}@{where}/app"
        tpl = _URL_TEXT[variant] if rng.random() < 0.5 else _URL_TEXT_ALT[variant]
        items.append(("url", tpl.format(url=url), [pw]))
    for _ in range(3):
        pw = v.password()
        items.append(("connection_string", _CONN[variant].format(p=pw), [pw]))

    if variant < 3:  # Azure keys and opaque bearer tokens (tuned draws only)
        key = v.b64(86) + "=="
        items.append(
            (
                "azure",
                f"DefaultEndpointsProtocol=https;AccountName=acct{variant};AccountKey={key};EndpointSuffix=core.windows.net",
                [key],
            )
        )
        tok = v.url(32)
        items.append(("bearer", f"curl -H 'Authorization: Bearer {tok}' https://api.example.com/v2/me", [tok]))

    # passwords in prose, glued environment names, short flags
    for tpl in _PROSE[variant] + _GLUED[variant] + _FLAGS[variant]:
        p = v.password()
        items.append(("password", tpl.format(p=p), [p]))

    # bare hex / base64 after "key" or "token"
    for tpl in _BARE[variant]:
        h, b = v.hex(rng.choice((32, 48, 64))), v.b64(rng.choice((24, 32, 40))) + "=="
        items.append(("bare", tpl.format(h=h, b=b), [h if "{h}" in tpl else b]))

    # AWS secret keys without their variable name
    for _ in range(3):
        kid, sec = "AKIA" + v.of(_UPPER, 16), v.b64(40)
        items.append(("aws_secret", _AWS[variant].format(kid=kid, sec=sec), [kid, sec]))
    sec = v.b64(40)
    items.append(("aws_secret", _AWS_ALONE[variant].format(sec=sec), [sec]))

    # PEM blocks, any case, PGP included
    for label in _PEM[variant]:
        body = v.pgp_body()
        text = f"here it is:\n-----BEGIN {label}-----\n{body}\n-----END {label}-----\nthanks"
        if label in ("Private Key", "PRIVATE KEY"):
            text = f"-----BEGIN {label}-----\n{body}"  # cut before the END line
        items.append(("private_key", text, [body]))

    # JWTs
    for tpl in _JWT[variant]:
        head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
        claims = base64.urlsafe_b64encode(json.dumps({"sub": v.digits(8), "exp": v.digits(10)}).encode()).decode().rstrip("=")
        tok = f"{head}.{claims}.{v.url(43)}"
        items.append(("jwt", tpl.format(t=tok), [tok]))

    # tokens wrapped over two lines
    wrapped = ((3, 2, 12, 18), (0, 4, 22), (3, 7, 19), (1, 8, 26))[variant]
    for at in wrapped:
        x = PROVIDERS[at][3](v)
        cut = rng.randint(max(14, len(x) // 3), len(x) - 12)
        items.append(("wrapped", _WRAP[variant].format(a=x[:cut], b=x[cut:]), [x[:cut] + "\n" + x[cut:]]))

    # look-alike characters or zero-width spaces inside a token
    swaps = {"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х"}
    for at in ((3, 0, 13), (6, 22, 7), (4, 1, 16), (5, 17, 25))[variant]:
        x = PROVIDERS[at][3](v)
        cut = rng.randint(8, len(x) - 8)
        zw = x[:cut] + rng.choice("\u200b\u200c\u2060") + x[cut:]
        items.append(("zero_width", _ODD[variant].format(zw=zw), [x]))
        chars = list(x)
        for i, ch in enumerate(chars):
            if ch in swaps and i > 4 and rng.random() < 0.5:
                chars[i] = swaps[ch]
        items.append(("lookalike", _ODD_LOOK[variant].format(look="".join(chars)), [x]))
    return [{"text": t, "secrets": s, "kind": k, "form": "special", "part": part} for k, t, s in items]


def secrets(part: str) -> list[dict[str, Any]]:
    """The labelled secrets of ``part`` (``tuned`` or ``heldout``): each a dict with ``text``,
    ``secrets`` (the values that must not survive), ``kind``, ``form`` and ``part``.

    ``tuned`` is three draws (seeds 1, 7 and 23, each with its own carriers and templates);
    ``heldout`` a fourth (seed 31, its own carriers and templates), written before it was
    first measured and not tuned on."""
    if part not in PARTS:
        raise ValueError(f"part is one of {PARTS}")
    if part == "heldout":
        return _fourth(_Values(random.Random(131)), 1, part)
    v = _Values(random.Random(31))  # the third held-out draw, measured then tuned on
    out = _named(v, _LAST_CARRIERS, 3 * len(PROVIDERS), part) + _special(v, 3, part)
    for seed, carriers, variant, extra in (
        (1, _TUNED_CARRIERS, 0, 40),
        (7, _MORE_CARRIERS, 1, 10),
        (23, _THIRD_CARRIERS, 2, len(PROVIDERS)),
    ):
        v = _Values(random.Random(seed))
        out += _named(v, carriers, 2 * len(PROVIDERS) + extra, part) + _special(v, variant, part)
    return out + _fourth(_Values(random.Random(101)), 0, part)


# --- ordinary turns ---------------------------------------------------------------------

_NAMES = ["Maria", "Tom", "Priya", "Jon", "Aiko", "Lena", "Omar", "Caroline", "Melanie", "Dev", "Sam", "Joanna"]
_PLACES = ["Lisbon", "Berlin", "the lake house", "Osaka", "the office", "my parents' place", "Toronto", "the gym"]
_THINGS = [
    "the billing worker",
    "the ingest pipeline",
    "the React app",
    "our Postgres replica",
    "the nightly job",
    "the search index",
    "the cron on web2",
    "the staging cluster",
    "the CSV export",
    "the mobile build",
]
_CHAT = [
    "Hey {n}! I went to {p} yesterday and it was lovely. How have you been?",
    "I'm swamped with work and the kids, but we finally booked the trip to {p}.",
    "{n} said the key to good sourdough is patience, and honestly she's right.",
    "Thanks for the tip about {p}, we had the best coffee there.",
    "I forgot my password again, so I had to reset it through the email link.",
    "The secret to a good pitch is knowing your audience, {n} told me.",
    "We did a secret santa at work, I got {n} a plant.",
    "Can you remind me what we decided about {t}?",
    "The key takeaway from the retro was to ship smaller changes.",
    "My token for the arcade ran out, so the kids played air hockey instead.",
    "Do you still have the spare key to {p}? I left mine at {n}'s.",
    "I passed the exam! Studying with {n} every evening paid off.",
    "The password manager keeps asking me to update the master password, it's annoying.",
    "{n} is moving to {p} next month; we should plan a farewell dinner.",
    "Honestly the best part of the week was the hike near {p}.",
    "I keep thinking about what {n} said: auth is hard, and caching is harder.",
    "Running is my therapy. 10k this morning around {p}.",
    "That book about secrets of the deep sea was amazing, highly recommend.",
]
_TECH = [
    "The crash in {t} comes from a stale config: it still reads DATABASE_HOST from the old map.",
    "Set max_tokens=4096 and temperature=0.2 for the summariser; the token budget is 2000 per turn.",
    "We rotate the API keys every 90 days; the rotation job lives in ops/rotate.py.",
    "Use a token bucket for the rate limiter: capacity 100, refill 10 per second.",
    "The password policy requires 12 characters and one symbol; see docs/security.md.",
    "Keys in Redis are prefixed with the tenant, e.g. tenant:42:session:abc.",
    "The primary key of the table is (tenant_id, event_id), both text.",
    "Store the secret in Vault and read it at startup with the Kubernetes auth method.",
    "The auth token expires after an hour; refresh it with the refresh endpoint.",
    "Commit {sha} fixed the race in {t}; the short hash is {short}.",
    "Request {uuid} failed with 502 after 30 s; the trace id is {hex32}.",
    "The sha256 of the release tarball is {hex64}, matching the published checksum.",
    "md5 of the old file: {hex32}. It changed after the upgrade.",
    "The commit hash is {sha} and the tag is v2.3.1.",
    "The cache key is user:{num}:profile and it expires after 300 s.",
    "The idempotency key is {uuid}, the same as on the retry.",
    "GPG key ID {hexu16} signed the release.",
    "Redis is at redis://cache.internal:6379/0 and Postgres at postgres://db.internal:5432/app.",
    "Docs: https://docs.example.com/guide/auth?page=2&lang=en#tokens",
    "See https://github.com/org/repo/commit/{sha} for the diff.",
    "The image is registry.example.com/billing@sha256:{hex64}",
    "Secrets are mounted from the secret named {t_slug}-creds in the namespace.",
    "Password reset emails go through SES; bounce rate is 0.4%.",
    "The tokenizer splits on whitespace and counts 4 characters a token.",
    "Pass the --dry-run flag first; then pass --yes to apply.",
    "Keyboard shortcuts: Ctrl+K opens the palette, Ctrl+P the file picker.",
]
_CODE = [
    '```python\ntoken = os.environ["GITHUB_TOKEN"]\nheaders = {{"Authorization": f"Bearer {{token}}"}}\n```',
    '```python\npassword = getpass.getpass("Password: ")\nclient.login(user, password)\n```',
    '```python\napi_key = settings.OPENAI_API_KEY\nif not api_key:\n    raise RuntimeError("set OPENAI_API_KEY")\n```',
    "```js\nconst secret = process.env.JWT_SECRET;\nconst token = jwt.sign({{ sub: user.id }}, secret);\n```",
    "```bash\ngit log --oneline -3\n{short} Fix flaky test\n{short2} Bump deps\n{short3} Merge branch 'main'\n```",
    "```\ncommit {sha}\nAuthor: {n} <{nl}@example.com>\nDate:   Tue Mar 4 10:12:01 2025 +0100\n\n    Retry on timeout\n```",
    '```yaml\nservices:\n  api:\n    image: api:1.4.2\n    ports: ["8080:80"]\n    environment:\n'
    "      LOG_LEVEL: info\n      DB_PASSWORD_FILE: /run/secrets/db_password\n```",
    "```bash\ndocker run -p 8080:80 -u 1000:1000 -v $PWD:/app nginx:1.25\n```",
    "```bash\npsql -h db.internal -p 5432 -U app -d app\nssh -p 2222 deploy@web1.example.com\n```",
    '```json\n{{"id": "{uuid}", "max_tokens": 512, "token_count": 341, "key": "user_profile"}}\n```',
    "```python\ndef get_token(self):\n    return self._token  # token = None until login\n```",
    "```sql\nSELECT id, email FROM users WHERE api_key_hash = $1 AND revoked_at IS NULL;\n```",
    '```\nTraceback (most recent call last):\n  File "/srv/app/worker.py", line 88, in run\n    conn = pool.get()\n'
    "redis.exceptions.ConnectionError: Error 111 connecting to cache.internal:6379.\n```",
    "```python\nhashlib.sha256(data).hexdigest()  # '{hex64}'\n```",
    "```\n2025-03-04T10:12:01Z INFO request_id={uuid} user=42 path=/v1/items status=200 dur=12ms\n```",
    "```ini\n[database]\nhost = db.internal\nport = 5432\npassword = ${{DB_PASSWORD}}\n```",
    "```bash\nexport GITHUB_TOKEN=$(gh auth token)\nexport AWS_PROFILE=staging\n```",
    "```python\nKEY_SIZE = 2048\nprivate_key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_SIZE)\n```",
]


def _stdlib_docs() -> list[str]:
    """Paragraphs of the standard library's docstrings (technical English that uses key,
    token, secret, password and hash innocently): each module's and its exported names'."""
    import importlib

    mods = [
        "secrets",
        "hashlib",
        "hmac",
        "getpass",
        "tokenize",
        "ssl",
        "json",
        "base64",
        "uuid",
        "collections",
        "functools",
        "itertools",
        "os",
        "pathlib",
        "re",
        "string",
        "textwrap",
        "urllib.parse",
        "http.cookies",
        "email.message",
        "argparse",
        "logging",
        "sqlite3",
        "shutil",
        "subprocess",
        "threading",
        "zipfile",
        "csv",
        "datetime",
        "decimal",
        "difflib",
        "heapq",
        "inspect",
        "random",
        "statistics",
        "typing",
    ]
    paragraphs: list[str] = []
    for name in mods:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        docs = [mod.__doc__ or ""]
        # the names a module exports (not dir(): that changes with what else was imported)
        for attr in sorted(getattr(mod, "__all__", ())):
            obj = getattr(mod, attr, None)
            doc = getattr(obj, "__doc__", None) if callable(obj) else None
            if isinstance(doc, str):
                docs.append(doc)
        for doc in docs:
            for para in doc.split("\n\n"):
                para = para.strip()
                if 60 <= len(para) <= 1500:
                    paragraphs.append(para)
    return list(dict.fromkeys(paragraphs))


def _b64_image(v: _Values) -> str:
    raw = b"\x89PNG\r\n\x1a\n" + bytes(v.rng.getrandbits(8) for _ in range(v.rng.randint(60, 300)))
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def ordinary(count: int = 6000) -> list[str]:
    """``count`` ordinary turns (deterministic): none holds a secret."""
    v = _Values(random.Random(42))
    rng = v.rng
    docs = _stdlib_docs()
    rng.shuffle(docs)

    def fill(tpl: str) -> str:
        t = rng.choice(_THINGS)
        return tpl.format(
            n=rng.choice(_NAMES),
            nl=rng.choice(_NAMES).lower(),
            p=rng.choice(_PLACES),
            t=t,
            t_slug=t.split()[-1].replace("'", ""),
            sha=v.hex(40),
            short=v.hex(7),
            short2=v.hex(7),
            short3=v.hex(7),
            uuid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            hex32=v.hex(32),
            hex64=v.hex(64),
            hexu16=v.hex(16).upper(),
            num=rng.randint(1, 99999),
        )

    out: list[str] = []
    while len(out) < count:
        r = rng.random()
        if r < 0.35:
            text = " ".join(fill(rng.choice(_CHAT)) for _ in range(rng.randint(1, 3)))
        elif r < 0.55:
            text = " ".join(fill(rng.choice(_TECH)) for _ in range(rng.randint(1, 3)))
        elif r < 0.70:
            text = fill(rng.choice(_TECH)) + "\n\n" + fill(rng.choice(_CODE))
        elif r < 0.75:
            text = f"Here's the screenshot: ![chart]({_b64_image(v)}) — the spike is at 10:12."
        elif r < 0.80:
            text = rng.choice(
                [
                    "我们的数据库在上海的服务器上，请帮我检查一下连接池的配置。",
                    "パスワードを変更してください。明日までにデプロイします。",
                    "Пароль от почты я сменил, ключ от квартиры у соседа.",
                    "배포 스크립트에서 환경 변수를 읽는 부분을 고쳐 주세요.",
                    "El token de acceso caduca en una hora; la clave está en el gestor.",
                    "Das Passwort muss mindestens 12 Zeichen haben, sagt die Richtlinie.",
                ]
            )
            text += " " + fill(rng.choice(_CHAT))
        elif docs:
            text = docs.pop()
        else:
            text = fill(rng.choice(_CHAT))
        out.append(text)
    return out


# --- the fourth draw (2026-11): registry and CI tokens, passwords in markup and config files,
# "password" in other languages, and ordinary turns that name hex digests --------------------
# Two draws with their own seeds and templates: ``tuned2`` (tuned on) and ``heldout2`` (held
# out: measured before any rule was changed for it, and not tuned on).

_BASE32 = string.ascii_uppercase + "234567"

REGISTRY: list[_Provider] = [
    ("docker", "Docker Hub access token", "DOCKER_TOKEN", lambda v: "dckr_pat_" + v.url(v.near(27))),
    ("docker", "Docker org access token", "DOCKERHUB_TOKEN", lambda v: "dckr_oat_" + v.url(v.near(32))),
    (
        "atlassian",
        "Atlassian API token",
        "JIRA_API_TOKEN",
        lambda v: "ATATT3xFfGF0" + v.url(v.near(170)) + "=" + v.hex(8).upper(),
    ),
    ("atlassian", "Bitbucket app password", "BITBUCKET_APP_PASSWORD", lambda v: "ATBB" + v.alnum(v.near(32))),
    ("circleci", "CircleCI token", "CIRCLE_TOKEN", lambda v: "CCIPAT_" + v.alnum(22) + "_" + v.hex(40)),
    ("circleci", "CircleCI project token", "CIRCLECI_PROJECT_TOKEN", lambda v: "CCIPRJ_" + v.alnum(22) + "_" + v.hex(40)),
    ("gitlab", "GitLab runner token", "RUNNER_TOKEN", lambda v: "glrt-" + v.url(v.near(20))),
    ("gitlab", "GitLab registration token", "REGISTRATION_TOKEN", lambda v: "GR1348941" + v.url(v.near(20))),
    ("gitlab", "GitLab deploy token", "CI_DEPLOY_PASSWORD", lambda v: "gldt-" + v.url(v.near(20))),
    ("npm", "npm token", "NODE_AUTH_TOKEN", lambda v: "npm_" + v.alnum(v.near(36))),
    ("pypi", "PyPI token", "TWINE_PASSWORD", lambda v: "pypi-AgEIcHlwaS5vcmc" + v.url(v.near(70))),
    ("buildkite", "Buildkite token", "BUILDKITE_API_TOKEN", lambda v: "bkua_" + v.hex(40)),
    ("terraform", "Terraform Cloud token", "TFE_TOKEN", lambda v: v.alnum(14) + ".atlasv1." + v.url(v.near(67))),
    ("pulumi", "Pulumi access token", "PULUMI_ACCESS_TOKEN", lambda v: "pul-" + v.hex(40)),
    ("grafana", "Grafana service account token", "GRAFANA_TOKEN", lambda v: "glsa_" + v.alnum(32) + "_" + v.hex(8)),
    ("supabase", "Supabase access token", "SUPABASE_ACCESS_TOKEN", lambda v: "sbp_" + v.hex(40)),
    ("sonar", "SonarQube token", "SONAR_TOKEN", lambda v: "squ_" + v.hex(40)),
    ("rubygems", "RubyGems API key", "GEM_HOST_API_KEY", lambda v: "rubygems_" + v.hex(48)),
    ("nuget", "NuGet API key", "NUGET_API_KEY", lambda v: "oy2" + v.of(string.ascii_lowercase + string.digits, 43)),
    ("jfrog", "Artifactory API key", "ARTIFACTORY_API_KEY", lambda v: "AKCp" + v.alnum(v.near(69))),
    ("doppler", "Doppler token", "DOPPLER_TOKEN", lambda v: "dp.pt." + v.alnum(v.near(43))),
    ("tailscale", "Tailscale auth key", "TS_AUTHKEY", lambda v: "tskey-auth-" + v.alnum(11) + "CNTRL-" + v.alnum(v.near(33))),
    ("netlify", "Netlify token", "NETLIFY_AUTH_TOKEN", lambda v: "nfp_" + v.alnum(v.near(36))),
    ("flyio", "Fly.io token", "FLY_API_TOKEN", lambda v: "fo1_" + v.url(v.near(43))),
    ("age", "age secret key", "SOPS_AGE_KEY", lambda v: "AGE-SECRET-KEY-1" + v.of(_BASE32, 58)),
    ("azure_ad", "Azure client secret", "AZURE_CLIENT_SECRET", lambda v: v.alnum(3) + "8Q~" + v.url(v.near(31))),
    ("sentry", "Sentry auth token", "SENTRY_AUTH_TOKEN", lambda v: "sntryu_" + v.hex(64)),
]


def _plain(v: _Values) -> str:
    """A password of the kind people put in config files: sometimes plain words."""
    words = ["letmein", "sunflower", "bluebird", "qwertyuiop", "correcthorse", "pineapple", "starlight", "moonbeam"]
    if v.rng.random() < 0.5:
        return v.rng.choice(words) + v.rng.choice(words)
    return v.password()


# (registry, login command) templates: {u} the user, {x} the token
_LOGIN = (
    [
        "docker login -u {u} -p {x}",
        "docker login registry.example.com --username {u} --password {x}",
        "podman login -u {u} -p {x} quay.io",
        "helm registry login ghcr.io -u {u} -p {x}",
    ],
    [
        "docker login -u {u} --password={x} registry.gitlab.com",
        "echo {x} | docker login --username {u} --password-stdin",
        "skopeo login --username {u} --password {x} registry.example.com",
        "cf login -a https://api.example.com -u {u} -p {x}",
    ],
)
_MARKUP = (
    [
        "<server>\n  <id>nexus</id>\n  <username>{u}</username>\n  <password>{p}</password>\n</server>",
        '<connection user="{u}" password="{p}" host="db.internal"/>',
        "<datasource>\n  <user-name>{u}</user-name>\n  <password>{p}</password>\n</datasource>",
        "<Credentials><UserName>{u}</UserName><Password>{p}</Password></Credentials>",
        '<add name="Main" connectionString="Server=db;User Id={u};Password={p};" />',
    ],
    [
        "<settings>\n  <servers>\n    <server>\n      <id>central</id>\n      <username>{u}</username>\n"
        "      <password>{p}</password>\n    </server>\n  </servers>\n</settings>",
        '<property name="hibernate.connection.password">{p}</property>',
        "<db-password>{p}</db-password>",
        "<smtp host='mail.example.com' user='{u}' pass='{p}' />",
        "<jdbc:password>{p}</jdbc:password>",
    ],
)
_CONFIG = (
    [
        "db.internal:5432:app:{u}:{p}",
        "# ~/.pgpass\n*:*:*:postgres:{p}",
        "machine api.example.com login {u} password {p}",
        "[client]\nuser = {u}\npassword = {p}",
        "spring.datasource.password={p}",
        "database:\n  user: {u}\n  password: {p}",
        '[postgres]\nhost = "db"\npassword = "{p}"',
        "DB_PASS={p}",
    ],
    [
        "localhost:5432:*:{u}:{p}",
        "cat ~/.pgpass\ndb.prod.internal:6432:billing:{u}:{p}",
        "machine git.example.com\n  login {u}\n  password {p}",
        "[smtp]\nusername={u}\npassword={p}",
        "mail.smtp.password = {p}",
        "redis:\n  host: cache\n  password: {p}",
        'password = "{p}"\nport = 5432',
        "export MYSQL_PWD={p}",
    ],
)
_LANGUAGES = (
    [
        "mon mot de passe est {p}",
        "Mot de passe : {p}",
        "la contraseña es {p}",
        "Contraseña: {p}",
        "das Passwort ist {p}",
        "Kennwort: {p}",
        "a senha é {p}",
        "la password del server è {p}",
        "het wachtwoord is {p}",
        "пароль: {p}",
        "密码：{p}",
        "パスワードは {p} です",
        "비밀번호: {p}",
        "hasło: {p}",
    ],
    [
        "le mot de passe du wifi c'est {p}",
        "contraseña del router = {p}",
        "Passwort für den Server: {p}",
        "minha senha: {p}",
        "password di root: {p}",
        "Wachtwoord: {p}",
        "мой пароль {p}",
        "密码是 {p}",
        "パスワード：{p}",
        "비밀번호는 {p} 입니다",
        "şifre: {p}",
        "mật khẩu: {p}",
        "kata sandi: {p}",
        "Passwort lautet {p}",
    ],
)
_REGISTRY_CARRIERS = (
    [
        lambda v, label, env, x: f"{env}={x}",
        lambda v, label, env, x: f"here's the {label}: {x}",
        lambda v, label, env, x: f"  - run: echo {x} > ~/.token",
        lambda v, label, env, x: f"{x}",
        lambda v, label, env, x: f"curl -H 'X-Token: {x}' https://ci.example.com/api",
    ],
    [
        lambda v, label, env, x: f'{env.lower()}: "{x}"',
        lambda v, label, env, x: f"I think the {label} expired, it was {x}",
        lambda v, label, env, x: f"env:\n  {env}: {x}",
        lambda v, label, env, x: f"the CI log printed {x} by mistake",
        lambda v, label, env, x: f"{label} -> {x}",
    ],
)
_USERS = ["deploy", "ci-bot", "maria", "admin", "svc_release", "jenkins"]


def _fourth(v: _Values, variant: int, part: str) -> list[dict[str, Any]]:
    rng = v.rng
    items: list[dict[str, Any]] = []

    def add(kind: str, form: str, text: str, secret: str) -> None:
        items.append({"text": text, "secrets": [secret], "kind": kind, "form": form, "part": part})

    carriers = _REGISTRY_CARRIERS[variant]
    for i, (kind, label, env, make) in enumerate(REGISTRY * 2):
        x = make(v)
        add(kind, "registry", carriers[(i + variant) % len(carriers)](v, label, env, x), x)
    for tpl in _LOGIN[variant]:
        kind, label, env, make = REGISTRY[rng.randrange(len(REGISTRY))]
        x = make(v) if rng.random() < 0.5 else _plain(v)
        add("login", "registry", tpl.format(u=rng.choice(_USERS), x=x), x)
    for tpl in _MARKUP[variant] * 2:
        p = _plain(v)
        add("markup", "config", tpl.format(u=rng.choice(_USERS), p=p), p)
    for tpl in _CONFIG[variant] * 2:
        p = _plain(v)
        add("config_file", "config", tpl.format(u=rng.choice(_USERS), p=p), p)
    for tpl in _LANGUAGES[variant]:
        p = v.password()
        add("password_language", "language", tpl.format(p=p), p)
    return items


# ordinary turns that name hex digests, cache keys, commits and checksums, or say password in
# other languages and config files without one
_DIGEST_TURNS = (
    [
        "The cache key is {sha1}, computed from the request body.",
        "the cache key for that query was {hex32} so it should have hit",
        "Commit {sha1} broke the build; revert it and cherry-pick {short}.",
        "sha256 checksum: {hex64}",
        "The SHA-1 of the blob is {sha1}.",
        "md5sum says {hex32}  backup.tar.gz",
        'ETag: "{hex32}"',
        "the content hash is {hex64} and the object key is uploads/{hex32}.png",
        "Idempotency key {hex32} was reused, so Stripe returned the first response.",
        "git show {sha1} -- src/cache.py",
        "The dedup key is the sha1 of the payload: {sha1}.",
        "Bazel cache key {hex64} missed on CI but hit locally.",
        "The release checksum (SHA-512) is {hex128}.",
        "Build {short} fixed the token refresh; the image digest is sha256:{hex64}.",
        "Primary key {hex32} already exists in table sessions.",
        "Passwort vergessen? Der Link kommt per E-Mail.",
        "J'ai oublié mon mot de passe, je dois le réinitialiser.",
        "¿Dónde cambio la contraseña del correo?",
        "password_file: /run/secrets/db_password",
        "password: ${{POSTGRES_PASSWORD}}",
        "<password></password> is empty in the template, fill it from the vault",
    ],
    [
        "the cache key is {sha1}",
        "Cache key: {hex64} (restored from the previous run)",
        "HEAD is now at {short} after the reset; the commit hash is {sha1}.",
        "checksum mismatch: expected {hex64}, got {hex64b}",
        "The file's sha1 is {sha1}, the same as upstream.",
        "the redis key is session:{hex32} and it expires in an hour",
        "fingerprint {hex32} matches the one in known_hosts",
        "Merge commit {sha1} into main, then tag it.",
        "The lock file pins the tarball by integrity sha512-{b64_88}",
        "docker pull app@sha256:{hex64}",
        "the hash key of the partition is {hex32}, so all rows land on one shard",
        "Git object {sha1} is missing from the pack.",
        "Sort key {hex32} was written twice by the retry.",
        "The nonce is {hex32} and the request id is {uuid}.",
        "The build cache key {hex32} includes the lockfile hash.",
        "Das Passwort wird mit bcrypt gehasht, nie im Klartext gespeichert.",
        "Le mot de passe doit contenir au moins 12 caractères.",
        "A senha expira a cada 90 dias.",
        "密码错误，请重新输入。",
        "password:\n  min_length: 12\n  require_symbol: true",
        '<password encrypted="true"/>',
    ],
)


def ordinary_digests(part: str, count: int = 300) -> list[str]:
    """Ordinary technical turns (none holds a secret) of the fourth draw: ``tuned`` or
    ``heldout``, each with its own templates and seed. Digests named as hashes, cache keys,
    commits and checksums; "password" in other languages and in config without a value."""
    if part not in PARTS:
        raise ValueError(f"part is one of {PARTS}")
    variant = PARTS.index(part)
    v = _Values(random.Random((142, 143)[variant]))
    rng = v.rng
    out = []
    for i in range(count):
        tpl = _DIGEST_TURNS[variant][i % len(_DIGEST_TURNS[variant])]
        text = tpl.format(
            sha1=v.hex(40),
            short=v.hex(7),
            hex32=v.hex(32),
            hex64=v.hex(64),
            hex64b=v.hex(64),
            hex128=v.hex(128),
            b64_88=v.b64(86) + "==",
            uuid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        )
        if rng.random() < 0.3:
            text = (
                text
                + " "
                + rng.choice(_TECH).format(
                    t=rng.choice(_THINGS),
                    t_slug="billing",
                    sha=v.hex(40),
                    short=v.hex(7),
                    uuid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    hex32=v.hex(32),
                    hex64=v.hex(64),
                    hexu16=v.hex(16).upper(),
                    num=rng.randint(1, 99999),
                )
            )
        out.append(text)
    return out
