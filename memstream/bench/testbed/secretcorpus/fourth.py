"""The fourth draw (2026-11): registry and CI tokens, passwords in markup and config files,
"password" in other languages (``fourth_draw``)."""

from __future__ import annotations

import string
from typing import Any

from memstream.bench.testbed.secretcorpus.values import Provider, ValueMaker

# --- the fourth draw (2026-11): registry and CI tokens, passwords in markup and config files,
# "password" in other languages, and ordinary turns that name hex digests --------------------
# Two draws with their own seeds and templates: ``tuned2`` (tuned on) and ``heldout2`` (held
# out: measured before any rule was changed for it, and not tuned on).

_BASE32 = string.ascii_uppercase + "234567"

REGISTRY: list[Provider] = [
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


def _plain(v: ValueMaker) -> str:
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


def fourth_draw(v: ValueMaker, variant: int, part: str) -> list[dict[str, Any]]:
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
