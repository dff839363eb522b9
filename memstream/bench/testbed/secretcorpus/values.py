"""The corpus's made-up values: a seeded generator of each provider's format (``ValueMaker``)
and the providers it writes secrets of (``PROVIDERS``)."""

from __future__ import annotations

import base64
import random
import string
import uuid
from typing import Callable

PARTS = ("tuned", "heldout")


# --- values ----------------------------------------------------------------------------

_ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"
_URL = _ALNUM + "_-"


class ValueMaker:
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
Provider = tuple[str, str, str, Callable[[ValueMaker], str]]

PROVIDERS: list[Provider] = [
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
    ("aws", "AWS access key id", "AWS_ACCESS_KEY_ID", lambda v: "AKIA" + v.of(UPPER, v.near(16))),
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
