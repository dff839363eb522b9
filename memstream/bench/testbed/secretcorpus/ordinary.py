"""Ordinary turns that must come back unchanged (``ordinary``), and ordinary turns that name
hex digests, cache keys, commits and checksums (``ordinary_digests``)."""

from __future__ import annotations

import base64
import random
import uuid

from memstream.bench.testbed.secretcorpus.values import PARTS, ValueMaker

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


def _b64_image(v: ValueMaker) -> str:
    raw = b"\x89PNG\r\n\x1a\n" + bytes(v.rng.getrandbits(8) for _ in range(v.rng.randint(60, 300)))
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def ordinary(count: int = 6000) -> list[str]:
    """``count`` ordinary turns (deterministic): none holds a secret."""
    v = ValueMaker(random.Random(42))
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
    v = ValueMaker(random.Random((142, 143)[variant]))
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
