"""The secrets that are not "a name and a value": URLs with credentials, connection strings,
prose, glued and wrapped values, flags, PEM keys, JWTs, odd characters (``special_secrets``)."""

from __future__ import annotations

import base64
import json
from typing import Any

from memstream.bench.testbed.secretcorpus.values import PROVIDERS, UPPER, ValueMaker

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


def special_secrets(v: ValueMaker, variant: int, part: str) -> list[dict[str, Any]]:
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
        kid, sec = "AKIA" + v.of(UPPER, 16), v.b64(40)
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
