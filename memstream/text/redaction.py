"""Secrets out of text before it leaves the host or is stored: ``redact(text) -> (text, count)``.

Each secret is replaced by ``[REDACTED:<kind>]``; whatever identifies without granting
access is kept (the user and host of a URL, the name in ``api_key=``, the JSON field name).
Guarantee: pure, deterministic, never raises; ``redact`` of already-redacted text changes
nothing (idempotent); text without anything that looks like a secret comes back identical
(the same string object) with count 0.

Detection is generic rather than a list of exact formats, in three families:

* **Shapes** that are secrets wherever they appear: PEM private keys (any case, PGP blocks
  included, to the end of the text when the END line was clipped away), JWTs, and tokens
  by their provider's prefix with any plausible length (a token one character shorter or
  longer than the canonical form is still a token): OpenAI, Anthropic, Stripe, GitHub,
  GitLab, npm, Slack, SendGrid, Twilio, Discord, Telegram, Google (API keys and OAuth),
  AWS key ids, Hugging Face, Mailgun, Shopify, DigitalOcean, PyPI, Vault, Databricks,
  registries and CI (Docker Hub ``dckr_pat_``, Atlassian ``ATATT``/``ATBB``, CircleCI,
  GitLab runner registration, Buildkite, Terraform Cloud, Pulumi, Grafana, Supabase,
  SonarQube, RubyGems, NuGet, JFrog, Doppler, Tailscale, Netlify, Fly.io, Sentry, age,
  Azure AD client secrets), and any other ``<prefix>_<random>`` token whose random part
  looks drawn (``_random_run``: mixed case and digits, no long word); an AWS secret key (40
  mixed-case base64 characters) in a text that names AWS or holds an AWS key id.
* **Places**: the password in a URL or connection string (``scheme://user:pw@host``,
  ``redis://:pw@host``, ``Password=…;``, ``?password=…``), ``Authorization``/``Bearer``
  credentials, Azure ``AccountKey=``/``sig=``, the password of short command-line flags
  (``mysql -pX``, ``curl -u user:X``, ``sshpass -p X``, ``redis-cli -a X``, a registry's
  ``login -p X``/``--password X``, ``gh secret set NAME --body X``); markup elements and
  attributes that name a password or secret (``<password>X</password>``, ``<property
  name="….password">X</property>``); ``~/.pgpass`` lines and ``~/.netrc`` entries; a
  config file's password line (ini, properties, YAML, TOML, ``.env``: the whole value to
  the end of the line, plain words too, placeholders and references left alone).
* **Context**: a value next to a word such as password, passphrase, pwd, secret, token,
  credentials, api key, access key, private key, key or auth, in any of the ways people
  write it: ``=``, ``:``, ``=>``, "is", "was", "set to", a plain space, quoted, in
  backticks, in a code fence, a shell ``export``, JSON, YAML, ``.env``, a glued
  environment name (``PGPASSWORD=``), a camelCase or snake_case name (``clientSecret``,
  ``db_password``), "the password for the staging box is …". The value must look like a
  secret for its word: after a strong word (password, secret, token, …) 6+ characters with
  a digit or a symbol, 16+ letters, or anything quoted; after a weak word (key, auth) or
  with only a space between, a high-entropy run (16+ characters of one token with digits
  and letters, like hex or base64). Code and placeholders are not values (``os.environ[…]``,
  ``settings.API_KEY``, ``${TOKEN}``, ``<your-key>``, a call). "Password" in other
  languages (French, Spanish, German, Portuguese, Italian, Dutch, Russian, Chinese,
  Japanese, Korean, Polish, Turkish, Vietnamese, Indonesian, Swedish, Czech) followed by
  ``:``, a verb of the language or up to three words of its own, then a value with a digit
  or a symbol, or quoted. A weak word (key) after a word that makes it a key of data
  (cache, idempotency, primary, partition, object, commit, checksum, hash, …) names no
  secret: "the cache key is <sha1>" is left alone.

Before matching, zero-width characters inside a token are removed and look-alike letters
(Cyrillic, Greek, full-width) in a mostly-ASCII token are mapped to ASCII, so a token with
a zero-width space or a homoglyph in it is redacted whole (the output holds the normalised
text around it). A token wrapped over two lines is redacted with its second line when the
first is (the second line is a run of token characters with a digit).

Kinds: ``SECRET_KINDS``. Not secrets and never touched: git SHAs and other hex, UUIDs,
hashes named as such, ``max_tokens=200``, ordinary words. Not guaranteed: a password made
of plain words with no digit or symbol and not quoted (``password: hunter``), a bare
high-entropy value with no word and no known prefix around it, a secret split by more
than one line break.

Speed: a rule runs only when one of its literal triggers occurs in the lower-cased text,
and every rule is linear in the text (no input makes one re-read the rest of the text
from each of many starts: ``"token:" * n`` at 256 KiB takes milliseconds, not minutes;
``memstream bench text`` has the adversarial inputs). Patterns start with their literal
where they can (a start-of-token check placed before the literal would be tried at every
position); look-ahead windows (a PEM label, the words between a name and "is") are bounded.
"""

from __future__ import annotations

import re
from typing import Callable, Protocol

__all__ = ["redact", "SECRET_KINDS", "MARK"]

MARK = "[REDACTED:{}]"


class _Subber(Protocol):
    def subn(self, repl: Callable[[re.Match[str]], str], string: str) -> tuple[str, int]: ...


_Rule = tuple[str, tuple[str, ...], _Subber, Callable[[re.Match[str]], str]]


def _whole(kind: str) -> Callable[[re.Match[str]], str]:
    mark = MARK.format(kind)
    return lambda m: mark


def _group(kind: str, *groups: str) -> Callable[[re.Match[str]], str]:
    """Replace only the first of ``groups`` that took part in the match (default
    ``secret``), keeping the rest of the match."""
    mark = MARK.format(kind)
    names = groups or ("secret",)

    def replace(m: re.Match[str]) -> str:
        for name in names:
            start, end = m.span(name)
            if start >= 0:
                break
        s, base = m.group(), m.start()
        return s[: start - base] + mark + s[end - base :]

    return replace


_NOT_REDACTED = r"(?!\[REDACTED:)"
_E = r"(?![A-Za-z0-9_\-])"  # end of a token


def _lit(prefix: str) -> str:
    """``prefix`` at the start of a token, the check placed after the literal: a pattern
    that starts with a literal is searched for as a string, one that starts with a
    look-behind is tried at every position (about 40 times slower on plain text)."""
    return re.escape(prefix) + _after(len(prefix))


def _after(width: int) -> str:
    """After ``width`` characters just matched: they start a token."""
    return r"(?<![A-Za-z0-9_\-](?s:.{%d}))" % width


# --- normalisation: zero-width characters and look-alikes inside a token -----------------

_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
_LOOKS = (
    "аеорсухіјѕԁмтнвкАЕОРСУХІЈЅМТНВКΑΒΕΖΗΙΚΜΝΟΡΤΥΧοαικνρτυχ",
    "aeopcyxijsdmtHBkAEOPCYXIJSMTHBKABEZHIKMNOPTYXoaiknptux",
)
_LOOKALIKE = str.maketrans(
    _LOOKS[0] + "".join(chr(c) for c in range(0xFF01, 0xFF5F)), _LOOKS[1] + "".join(chr(c) for c in range(0x21, 0x7F))
)
_TOKENISH = "A-Za-z0-9_\\-+/=."
_ZW_INSIDE = re.compile(f"(?<=[{_TOKENISH}])[{_ZERO_WIDTH}]+(?=[{_TOKENISH}])")
_MIXED_RUN = re.compile(f"[{_TOKENISH}{_LOOKS[0]}\uff01-\uff5e]{{12,}}")
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")


def _normalise(text: str) -> str:
    """Zero-width characters between token characters removed; in a run of 12+ token
    characters with 6+ ASCII letters or digits, look-alike letters mapped to ASCII (a
    word of another script is left alone: it has no ASCII)."""
    if any(c in text for c in _ZERO_WIDTH):
        text = _ZW_INSIDE.sub("", text)

    def fold(m: re.Match[str]) -> str:
        run = m.group()
        if run.isascii() or len(_ASCII_ALNUM.findall(run)) < 6:
            return run
        return run.translate(_LOOKALIKE)

    return _MIXED_RUN.sub(fold, text)


# --- context: a value next to a word that names a secret ----------------------------------

_STRONG = (
    r"pass(?:word|wd|phrase|code)?|pwd|pw|secret|token|credentials?|creds"
    r"|api[_\-\s]?key|apikey|access[_\-\s]?key|private[_\-\s]?key|secret[_\-\s]?key"
)
_WEAK = r"key|auth"
# Where a name may start: a word start, after _ - . (db_password, --token), a camelCase
# hump (clientSecret), or, for a name in capitals, glued to other capitals (PGPASSWORD).
_NAME_START = r"(?:(?<![A-Za-z0-9])|(?<=[_.\-])|(?<=[a-z0-9])(?=[A-Z]))"
_GLUED = r"(?<=[A-Z0-9])(?:PASSWORD|PASSWD|PASS|PWD|SECRET|TOKEN|(?P<gkey>KEY))"
_CONTEXT = re.compile(
    r"(?=[PpSsTtCcAaKk])(?:" + _NAME_START + r"(?i:(?P<strong>" + _STRONG + r")|(?P<weak>" + _WEAK + r"))|" + _GLUED + r")"
    r"(?![A-Za-z0-9])(?:[\"'`]\]?)?"
    # "the password for the staging box is", "the root password on the NAS is"
    r"(?:[ \t]+(?:for|of|on|in|to)[ \t]+(?:(?:the|my|our|this)[ \t]+)?[\w\-]{1,30}(?:[ \t]+[\w\-]{1,30})?"
    r"(?=[ \t]+(?:is|was)\b|:))?"
    r"(?:"
    r"[ \t]*(?P<op>=>|->|:=|[:=])[ \t]*(?:\n[ \t]*)?(?:```[A-Za-z0-9]*[ \t]*\n[ \t]*)?"
    r"|[ \t]+(?P<verb>(?i:is[ \t]+set[ \t]+to|is[ \t]+now|was[ \t]+just|set[ \t]+to|is|was|are|were|equals|to))"
    r"(?![A-Za-z])[ \t]*:?[ \t]*"
    r"|[\"']?[ \t]+(?i:value)[ \t]*=[ \t]*"  # <add key="API_SECRET" value="…" />
    r"|(?P<space>[ \t]+)(?![^\n:=.!?;,]{1,40}?:[ \t])"
    # "the Heroku API key here so I don't lose it: …" (a high-entropy value only)
    r"|(?P<far>[ \t]+[^\n:=.!?;,]{1,40}?:)[ \t]*"
    r")"
)
_QUOTED = re.compile(r"([\"'`])(?!\[REDACTED:)([^\"'`\n]{1,200}?)\1|```[A-Za-z0-9]*[ \t]*\n")
_VALUE_END = re.compile(r"[\s\"'`,;()}\[\]<>]")
_SEGMENTS = re.compile(r"[_\-.:~]")
# not a value: code, references to somewhere else, placeholders
_NOT_A_VALUE = re.compile(
    r"(?:[$%{<\[(]|(?:os|process|settings|self|env|config|cfg|conf|this|request|args|params|options|opts|ctx)[.\[]"
    r"|https?://|getpass|none\b|null\b|true\b|false\b|undefined\b|required\b|optional\b|x{4}|\*{3})",
    re.IGNORECASE,
)
_IDENTIFIER = re.compile(r"[A-Za-z_]+(?:\.[A-Za-z_]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


# The word before "key" that makes it a key of data, not a secret: a key of a cache, a table,
# an index, an object store, a request (idempotency), a digest (hash, checksum, commit).
_QUALIFIED = re.compile(
    r"(?i:cache|idempotency|idempotence|primary|foreign|partition|sort|range|dedup|dedupe|deduplication|object|row"
    r"|etag|content|lookup|build|routing|shard|index|composite|unique|hash|commit|checksum|digest|fingerprint"
    r"|storage|s3|blob|bucket|map|dict|dictionary|cursor|pagination|redis|memcached?|table|record|natural|surrogate)"
    r"[ \t_\-.]{0,3}$"
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


_DIGIT_OR_SYMBOL = re.compile(r"[0-9!@#$%^&*+/=~?|]")


def _strong_value(value: str) -> bool:
    """After password, secret, token…: 6+ characters with a digit or a symbol, 16+
    letters, or 8 to 100 characters whose case changes three times or more (``BYpqLjdQ``)."""
    if len(value) < 6:
        return False
    if _DIGIT_OR_SYMBOL.search(value) is not None:
        return True
    if len(value) >= 16 and value.isalpha():
        return True
    return 8 <= len(value) <= 100 and _case_switches(value) >= 3


def _high_entropy(value: str) -> bool:
    """One run of 16+ token characters (between ``_ - . :``) with digits and letters and
    10+ distinct characters: hex, base64, a random token; not a UUID, a path or a slug."""
    if len(value) < 16:
        return False
    for seg in _SEGMENTS.split(value.rstrip("=")):
        if len(seg) >= 16 and any(c.isdigit() for c in seg) and any(c.isalpha() for c in seg) and len(set(seg)) >= 10:
            return True
    return False


class _Context:
    """The context rule as a scan: find a name and its separator (``_CONTEXT``), then judge
    the value after it. Linear: each name looks at a bounded window (a quoted value of at
    most 200 characters, 128 characters of a bare value to judge it), and where a bare
    value ends is found by a search that is remembered and reused by every later name in
    the same run, so each character is read a bounded number of times. A bare value of any
    length is redacted whole."""

    @staticmethod
    def subn(replace: Callable[[re.Match[str]], str], text: str) -> tuple[str, int]:
        mark = MARK.format("secret")
        parts: list[str] = []
        done = pos = count = 0
        end_memo = [-1, -1]
        search = _CONTEXT.search
        while (m := search(text, pos)) is not None:
            start = pos = m.end()
            if start <= done:
                continue
            weak = m.group("weak") is not None or m.group("gkey") is not None
            if weak and _QUALIFIED.search(text, max(0, m.start() - 40), m.start()) is not None:
                continue  # "the cache key is <sha1>": a key of a cache, an index, a commit, not a secret
            loose = m.group("space") is not None
            if loose and m.group("strong") is not None and m.group("strong").lower() == "pass":
                continue  # "pass it on", "pass stdout=PIPE": the verb, unless "pass: …" / "pass is …"
            if m.group("far") is not None:  # words between the name and ":": only a random value
                q = _QUOTED.match(text, start)
                end = _next(_VALUE_END, text, start, end_memo) if q is None or not q.group(1) else q.end(2)
                value = q.group(2) if q is not None and q.group(1) else text[start : min(end, start + 128)]
                if _high_entropy(value) or (not weak and _UUID.fullmatch(value) is not None):
                    first = q.start(2) if q is not None and q.group(1) else start
                    parts.append(text[done:first])
                    parts.append(mark)
                    done = pos = end
                    count += 1
                continue
            q = _QUOTED.match(text, start)
            if q is not None and q.group(1):  # a quoted value: judged as written
                value = q.group(2)
                ok = (
                    _high_entropy(value)
                    if weak or loose
                    else (len(value) >= 4 and _NOT_A_VALUE.match(value) is None and _IDENTIFIER.fullmatch(value) is None)
                )
                if ok:
                    parts.append(text[done : q.start(2)])
                    parts.append(mark)
                    done = pos = q.end(2)
                    count += 1
                continue
            if q is not None:  # a code fence opening: the value is its first line
                start = q.end()
            end = _next(_VALUE_END, text, start, end_memo)
            if end - start < 6 or text.startswith("[REDACTED:", start):
                continue
            value = text[start : min(end, start + 128)]
            if (
                _NOT_A_VALUE.match(value)
                or _IDENTIFIER.fullmatch(value)
                or text.startswith(("(", "["), end)
                or (value.endswith("=") and text.startswith(('"', "'"), end))
            ):  # value="…": a name
                continue
            if loose and "=" in value.rstrip("="):
                continue  # "token name=value": another assignment, not this name's value
            if weak or loose:
                if not _high_entropy(value) and not (
                    loose
                    and not weak
                    and _strong_value(value)
                    and any(c.isalpha() for c in value)
                    and any(not c.isalpha() for c in value)
                ):
                    continue
            elif not _strong_value(value):
                continue
            parts.append(text[done:start])
            parts.append(mark)
            done = pos = end
            count += 1
        if not count:
            return text, 0
        parts.append(text[done:])
        return "".join(parts), count


def _next(pattern: re.Pattern[str], text: str, start: int, memo: list[int]) -> int:
    """Index of the first match of ``pattern`` at or after ``start`` (``len(text)`` if
    none). ``memo`` holds the last (from, found): no match lies in [from, found), so any
    ``start`` in that range has the same answer without reading the text again."""
    if memo[0] <= start <= memo[1]:
        return memo[1]
    m = pattern.search(text, start)
    found = m.start() if m is not None else len(text)
    memo[0], memo[1] = start, found
    return found


class _AwsSecret:
    """40 base64 characters with upper- and lower-case letters and a digit or ``/ +``, in a
    text that names AWS or holds an AWS key id (the console's CSV, "keys: AKIA… / …")."""

    _RUN = re.compile(r"[A-Za-z0-9/+](?<![A-Za-z0-9/+=].)[A-Za-z0-9/+]{39}(?![A-Za-z0-9/+=])")

    @classmethod
    def subn(cls, replace: Callable[[re.Match[str]], str], text: str) -> tuple[str, int]:
        def one(m: re.Match[str]) -> str:
            s = m.group()
            if any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() or c in "/+" for c in s):
                return replace(m)
            return s

        out = cls._RUN.sub(one, text)
        count = out.count("[REDACTED:aws_secret_key]") - text.count("[REDACTED:aws_secret_key]")
        return (out, count) if count else (text, 0)


_TOKEN = r"[A-Za-z0-9_\-]"


def _random_run(value: str) -> bool:
    """A run that looks drawn at random from letters and digits (a token's secret part),
    not written: 20+ characters with 2+ digits, 2+ capitals and 2+ small letters, no word
    of more than 7 small letters in it, and 6+ changes between capitals, small letters
    and digits (``getUserProfileById2`` has too few)."""
    if len(value) < 20:
        return False
    digits = sum(c.isdigit() for c in value)
    upper = sum(c.isupper() for c in value)
    lower = sum(c.islower() for c in value)
    if digits < 2 or upper < 2 or lower < 2:
        return False
    if _LONG_WORD.search(value) is not None:
        return False
    kinds = ["d" if c.isdigit() else "u" if c.isupper() else "l" if c.islower() else "" for c in value]
    kinds = [k for k in kinds if k]
    return sum(a != b for a, b in zip(kinds, kinds[1:])) >= 6


_LONG_WORD = re.compile(r"[a-z]{8,}")


class _Prefixed:
    """A provider token not listed by name: a prefix of 2 to 8 letters (and at most one
    more short part: ``dckr_pat_``) joined by ``_``, then a random run (``_random_run``)
    of 20 to 200 letters and digits that ends the token."""

    _TOKEN_RE = re.compile(r"\b([A-Za-z]{2,8}_(?:[A-Za-z]{2,5}_)?)([A-Za-z0-9]{20,200})(?![A-Za-z0-9_\-])")

    @classmethod
    def subn(cls, replace: Callable[[re.Match[str]], str], text: str) -> tuple[str, int]:
        count = 0

        def one(m: re.Match[str]) -> str:
            nonlocal count
            if not _random_run(m.group(2)):
                return m.group()
            count += 1
            return replace(m)

        out = cls._TOKEN_RE.sub(one, text)
        return (out, count) if count else (text, 0)


class _Judged:
    """A pattern whose replace function may refuse a match (return it unchanged): only the
    matches it changed are counted."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern

    def subn(self, replace: Callable[[re.Match[str]], str], text: str) -> tuple[str, int]:
        count = 0

        def one(m: re.Match[str]) -> str:
            nonlocal count
            out = replace(m)
            if out != m.group():
                count += 1
            return out

        out = self.pattern.sub(one, text)
        return (out, count) if count else (text, 0)


def _markup(m: re.Match[str]) -> str:
    """Replace the value of a markup element that names a password or a secret, unless it
    is a placeholder (``${…}``, ``{{…}}``, ``********``)."""
    name = "secret" if m.group("secret") is not None else "value"
    value = m.group(name).strip()
    if not value or _NOT_A_VALUE.match(value) or _IDENTIFIER.fullmatch(value):
        return m.group()
    return _group("secret", name)(m)


def _config_value(m: re.Match[str]) -> str:
    """Replace a config line's password value, unless it is a placeholder or a reference."""
    value = m.group("secret")
    if _NOT_A_VALUE.match(value) or _IDENTIFIER.fullmatch(value) or value.lower() in _NOT_PASSWORDS:
        return m.group()
    return _group("secret")(m)


_NOT_PASSWORDS = frozenset({"none", "null", "true", "false", "yes", "no", "empty", "changeme", "required", "optional", "secret"})

# "password" in the languages agents are most used in (besides English): French, Spanish,
# German, Portuguese, Italian ("password", "parola d'ordine"), Dutch, Russian and Ukrainian,
# Chinese, Japanese, Korean, Polish, Turkish, Vietnamese, Indonesian, Swedish, Czech.
_WORDS = (
    "mot de passe|mots de passe|contraseña|contrasena|clave de acceso|passwort|kennwort|senha|parola d'ordine"
    "|wachtwoord|пароль|密码|密碼|口令|パスワード|暗証番号|비밀번호|암호|hasło|haslo|şifre|sifre|parola"
    "|mật khẩu|mat khau|kata sandi|lösenord|losenord|heslo"
)
_ITALIAN = ("la", "le", "il", "di", "della", "del", "tua", "mia", "sua", "nuova", "vecchia")  # "la password del server è …"
_WORD_TRIGGERS = (
    "de passe",
    "contrase",
    "clave de",
    "wort",
    "woord",
    "senha",
    "parola",
    "hasło",
    "haslo",
    "şifre",
    "sifre",
    "mật khẩu",
    "mat khau",
    "kata sandi",
    "lösenord",
    "losenord",
    "heslo",
    "пароль",
    "密码",
    "密碼",
    "口令",
    "パスワード",
    "暗証番号",
    "비밀번호",
    "암호",
)
# after the word: at most three words of its own (du wifi, del router, für den Server), then
# ":", "=", a verb (est, es, ist, é, è, is, lautet, c'est, 是, 为, は, 는, 은) or a space; then the value
_LANGUAGE_TAIL = (
    r"(?:[ \t]+[^\s:：=?.!,;]{1,20}){0,3}?"
    r"(?:[ \t]*[:：=][ \t]*|[ \t]+(?i:est|es|ist|é|è|is|lautet|c'est|era|war|was|sera)[ \t]+"
    r"|[ \t]*(?:是|为|為|は|는|은|이)[ \t]*|[ \t]+)"
    + _NOT_REDACTED
    + r"(?P<secret>[\"'][^\"'\n]{4,100}[\"']|(?=[^\s]{0,127}?[0-9!@#$%^&*+=~_])[!-~]{6,128})"
)
_LANGUAGE = re.compile(r"(?i:" + _WORDS + r")" + _LANGUAGE_TAIL)
# Italian says "password": after one of its articles or prepositions (a literal first: a fast search)
_ITALIAN_PASSWORD = re.compile(
    r"(?i:password)(?:"
    + "|".join(rf"(?<=\b{a} password)|(?<=\b{a.capitalize()} password)" for a in _ITALIAN)
    + ")"
    + _LANGUAGE_TAIL
)


def _language(m: re.Match[str]) -> str:
    """Replace the value after "password" in another language when it is quoted or has a
    digit or a symbol (``Sunsh1ne``, ``maple.hunter!``): a word alone is not a value."""
    value = m.group("secret")
    start, end = m.span("secret")
    quoted = value[0] in "\"'"
    if not quoted:
        stripped = value.rstrip(".,;:!?)")
        end -= len(value) - len(stripped)
        value = stripped
        if len(value) < 6 or _NOT_A_VALUE.match(value) or _IDENTIFIER.fullmatch(value):
            return m.group()
        if _SYMBOLIC.search(value) is None:
            return m.group()
    else:
        start, end = start + 1, end - 1
    s, base = m.group(), m.start()
    return s[: start - base] + MARK.format("secret") + s[end - base :]


_SYMBOLIC = re.compile(r"[0-9!@#$%^&*+=~_]")

_RULES: list[_Rule] = [
    (
        "private_key",
        ('"private_key"',),
        re.compile(r'"private_key"\s*:\s*"' + _NOT_REDACTED + r'(?P<secret>(?:[^"\\]|\\.)+)"'),
        _group("private_key"),
    ),
    (
        "private_key",
        ("private key",),
        re.compile(
            r"-----BEGIN (?P<label>[A-Za-z0-9 ]{0,40}(?i:private key)(?i: block)?)-----"
            r"[\s\S]*?(?:-----(?i:END) (?i:(?P=label))-----|\Z)"
        ),
        _whole("private_key"),
    ),
    (
        "jwt",
        ("eyj",),
        re.compile(_lit("eyJ") + r"[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
        _whole("jwt"),
    ),
    (
        "anthropic_key",
        ("sk-ant-",),
        re.compile(_lit("sk-ant-") + r"[A-Za-z0-9_\-]{20,}"),
        _whole("anthropic_key"),
    ),
    (
        "openai_key",
        ("sk-",),
        re.compile(_lit("sk-") + r"(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
        _whole("openai_key"),
    ),
    (
        "stripe_key",
        ("_live_", "_test_", "whsec_"),
        re.compile(r"[spr]k_(?:live|test)_" + _after(8) + r"[A-Za-z0-9]{10,}|" + _lit("whsec_") + r"[A-Za-z0-9]{20,}"),
        _whole("stripe_key"),
    ),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"gh[pousr]_" + _after(4) + r"[A-Za-z0-9]{20,}|" + _lit("github_pat_") + r"[A-Za-z0-9_]{20,}"),
        _whole("github_token"),
    ),
    (
        "gitlab_token",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "gloas-", "glcbt-", "gr1348941"),
        re.compile(
            "|".join(_lit(f"gl{p}-") + _TOKEN + "{16,}" for p in ("pat", "dt", "rt", "ptt", "ft", "soat", "oas", "cbt"))
            + "|"
            + _lit("GR1348941")  # a runner registration token
            + _TOKEN
            + "{16,}"
        ),
        _whole("gitlab_token"),
    ),
    (
        "npm_token",
        ("npm_",),
        re.compile(_lit("npm_") + r"[A-Za-z0-9]{30,}"),
        _whole("npm_token"),
    ),
    (
        "slack_token",
        ("xox", "xapp-", "hooks.slack.com"),
        re.compile(
            r"xox[baprse]-" + _after(5) + r"[A-Za-z0-9\-]{10,}|" + _lit("xapp-") + r"[A-Za-z0-9\-]{10,}"
            r"|" + _lit("https://hooks.slack.com/services/") + r"[A-Za-z0-9/]+"
        ),
        _whole("slack_token"),
    ),
    (
        "sendgrid_key",
        ("sg.",),
        re.compile(_lit("SG.") + _TOKEN + r"{16,}\." + _TOKEN + r"{16,}"),
        _whole("sendgrid_key"),
    ),
    (
        "twilio_key",
        ("sk", "ac"),
        re.compile(r"(?:SK|AC)" + _after(2) + r"[0-9a-f]{32}" + _E),
        _whole("twilio_key"),
    ),
    (
        "discord_token",
        ("/api/webhooks/", "."),
        re.compile(
            r"discord(?:app)?\.com/api/webhooks/\d+/" + _TOKEN + r"{20,}"
            r"|[MNO]" + _after(1) + _TOKEN + r"{23,27}\." + _TOKEN + r"{6}\." + _TOKEN + r"{27,40}" + _E
        ),
        _whole("discord_token"),
    ),
    (
        "telegram_token",
        (":aa",),
        re.compile(r"(?<![0-9])[0-9]{8,10}:AA" + _TOKEN + r"{30,}"),
        _whole("telegram_token"),
    ),
    (
        "google_oauth",
        ("gocspx-", "ya29.", "1//0"),
        re.compile(
            _lit("GOCSPX-") + _TOKEN + r"{20,}|" + _lit("ya29.") + _TOKEN + r"{20,}|" + r"1//0" + _after(4) + _TOKEN + r"{30,}"
        ),
        _whole("google_oauth"),
    ),
    (
        "google_api_key",
        ("aiza",),
        re.compile(_lit("AIza") + r"[0-9A-Za-z_\-]{30,40}" + _E),
        _whole("google_api_key"),
    ),
    (
        "hf_token",
        ("hf_",),
        re.compile(_lit("hf_") + r"[A-Za-z0-9]{20,}" + _E),
        _whole("hf_token"),
    ),
    (
        "aws_access_key_id",
        ("akia", "asia"),
        re.compile(r"A[KS]IA(?<![A-Za-z0-9]A[KS]IA)[A-Z0-9]{14,20}(?![A-Za-z0-9])"),
        _whole("aws_access_key_id"),
    ),
    (
        "api_key",  # other providers' keys: a prefix of their own and a long random part
        (
            "key-",
            "shp",
            "_v1_",
            "pypi-",
            "hvs.",
            "hvb.",
            "dapi",
            "gsk_",
            "r8_",
            "pplx-",
            "xai-",
            "pmak-",
            "lin_api_",
            "ntn_",
            "dp.",
            "sk_",
            "dckr_",
            "atatt",
            "atctt",
            "atbb",
            "ccip",
            "bkua_",
            "pul-",
            "glsa_",
            "glc_",
            "sbp_",
            "squ_",
            "sqp_",
            "sqa_",
            "rubygems_",
            "oy2",
            "akcp",
            "tskey-",
            "nfp_",
            "fo1_",
            "sntry",
        ),
        re.compile(
            "|".join(
                re.escape(prefix) + _after(len(prefix)) + ahead + _TOKEN + "{20,}"
                for prefix, ahead in (
                    ("key-", "(?=[0-9a-f]{32})"),
                    ("shpat_", ""),
                    ("shpss_", ""),
                    ("shpca_", ""),
                    ("shppa_", ""),
                    ("dop_v1_", ""),
                    ("doo_v1_", ""),
                    ("dor_v1_", ""),
                    ("pypi-AgE", ""),
                    ("hvs.", ""),
                    ("hvb.", ""),
                    ("dapi", "(?=[0-9a-f]{32})"),
                    ("gsk_", ""),
                    ("r8_", ""),
                    ("pplx-", ""),
                    ("xai-", ""),
                    ("PMAK-", ""),
                    ("lin_api_", ""),
                    ("ntn_", ""),
                    ("dp.st.", ""),
                    ("sk_", "(?=[A-Za-z0-9]{32})"),
                    # registries and CI: Docker Hub, Atlassian and Bitbucket, CircleCI, GitLab's
                    # runner registration, Buildkite, Pulumi, Grafana, Supabase, SonarQube,
                    # RubyGems, NuGet, JFrog, Doppler, Tailscale, Netlify, Fly.io, Sentry
                    ("dckr_pat_", ""),
                    ("dckr_oat_", ""),
                    ("ATATT", ""),
                    ("ATCTT", ""),
                    ("ATBB", ""),
                    ("CCIPAT_", ""),
                    ("CCIPRJ_", ""),
                    ("bkua_", ""),
                    ("pul-", "(?=[0-9a-f]{40})"),
                    ("glsa_", ""),
                    ("glc_", ""),
                    ("sbp_", ""),
                    ("squ_", ""),
                    ("sqp_", ""),
                    ("sqa_", ""),
                    ("rubygems_", ""),
                    ("oy2", "(?=[a-z0-9]{43})"),
                    ("AKCp", ""),
                    ("dp.pt.", ""),
                    ("dp.ct.", ""),
                    ("dp.sa.", ""),
                    ("tskey-", ""),
                    ("nfp_", ""),
                    ("fo1_", ""),
                    ("sntryu_", ""),
                    ("sntrys_", ""),
                )
            )
        ),
        _whole("api_key"),
    ),
    (
        "azure_key",
        ("accountkey=", "sharedaccesskey=", "sig="),
        re.compile(
            r"(?i:AccountKey|SharedAccessKey)=" + _NOT_REDACTED + r"(?P<secret>[A-Za-z0-9+/=]{20,})"
            r"|[?&]sig=" + _NOT_REDACTED + r"(?P<sig>[A-Za-z0-9%+/=]{20,})"
        ),
        _group("azure_key", "secret", "sig"),
    ),
    (
        "url_password",
        ("://",),
        re.compile(r"://[^\s:/?#@\[\]]*:" + _NOT_REDACTED + r"(?P<secret>[^\s@/?]+)@(?=[A-Za-z0-9\[])"),
        _group("url_password"),
    ),
    (
        "bearer",
        ("authorization", "bearer"),
        re.compile(
            r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|basic|token)\s+"
            + _NOT_REDACTED
            + r"(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)"
            r"|(?i:bearer)\s+" + _NOT_REDACTED + r"(?P<token>(?=[A-Za-z0-9\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{16,}=*)"
        ),
        _group("bearer", "secret", "token"),
    ),
    ("aws_secret_key", ("aws", "akia", "asia"), _AwsSecret, _whole("aws_secret_key")),
    (
        "secret",  # short command-line flags: mysql -pX, sshpass -p X, redis-cli -a X, curl -u user:X
        ("mysql", "mariadb", "sshpass", "redis-cli", "-u", "--user"),
        re.compile(
            r"(?:mysql\w*|mariadb\w*)\b[^\n|;&]{0,200}?[ \t]-p" + _NOT_REDACTED + r"(?P<secret>'[^'\n]+'|\"[^\"\n]+\"|[^\s'\"]+)"
            r"|(?:sshpass[ \t]+-p|redis-cli\b[^\n|;&]{0,200}?[ \t]-a)[ \t]*"
            + _NOT_REDACTED
            + r"(?P<flag>'[^'\n]+'|\"[^\"\n]+\"|[^\s'\"]+)"
            r"|(?<![A-Za-z0-9\-])(?:-u|--user)[ \t=]*['\"]?[^\s:'\"@/]+:"
            + _NOT_REDACTED
            + r"(?P<user>(?![0-9]+(?:[\s'\"]|\Z))[^\s'\"@]+)"
        ),
        _group("secret", "secret", "flag", "user"),
    ),
    (
        "api_key",  # tokens with a prefix of their own, not yet listed: prefix_random, prefix_kind_random
        ("_",),
        _Prefixed,
        _whole("api_key"),
    ),
    (
        "api_key",  # Terraform Cloud / HCP (<14>.atlasv1.<random>), age, Azure AD client secrets
        (".atlasv1.", "age-secret-key-1", "q~"),
        re.compile(
            r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{40,}"
            r"|" + _lit("AGE-SECRET-KEY-1") + r"[A-Z0-9]{50,}"
            r"|(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{3}[0-9]Q~[A-Za-z0-9_~.\-]{30,36}(?![A-Za-z0-9_~.\-])"
        ),
        _whole("api_key"),
    ),
    (
        "secret",  # a registry's login on the command line (docker/podman/helm/skopeo/cf login -p X, --password X);
        # a secret's value given to a CLI (gh secret set NAME --body X)
        ("login", "secret set"),
        re.compile(
            r"(?:(?i:login)\b[^\n|;&]{0,200}?[ \t](?:-p|--password)|(?i:secret)[ \t]+set\b[^\n|;&]{0,200}?[ \t](?:-b|--body))"
            r"(?:[ \t]+|=)" + _NOT_REDACTED + r"(?P<secret>'[^'\n]+'|\"[^\"\n]+\"|(?!-)[^\s'\"]+)"
        ),
        _group("secret"),
    ),
    (
        "secret",  # markup: <password>X</password>, <db-password>, <Password>, <property name="….password">X</…>
        ("</",),
        _Judged(
            re.compile(
                r"<(?P<tag>[\w:.\-]{0,40}?(?i:password|passwd|pwd|passphrase|secret|token|api[_\-]?key))(?:[ \t][^<>\n]{0,200})?>"
                + _NOT_REDACTED
                + r"(?P<secret>[^<>\n]{1,200})</(?P=tag)>"
                r"|<(?P<tag2>[\w:.\-]{1,40})[ \t][^<>\n]{0,200}?(?i:name|key)=[\"'][^\"'<>\n]{0,80}?"
                r"(?i:password|passwd|secret|token)[\"']\s*>" + _NOT_REDACTED + r"(?P<value>[^<>\n]{1,200})</(?P=tag2)>"
            )
        ),
        _markup,
    ),
    (
        "secret",  # ~/.pgpass (host:port:database:user:password) and ~/.netrc (machine … login … password …)
        (":", "machine"),
        re.compile(
            r"(?m:^)[ \t]*(?=[^:\s]*[A-Za-z*.])[^:\s#]+:(?:[0-9]{1,5}|\*):(?=[^:\s]*[A-Za-z*])[^:\s]+:"
            r"(?=[^:\s]*[A-Za-z*])[^:\s]+:" + _NOT_REDACTED + r"(?P<secret>[^\s]+)[ \t]*$"
            r"|(?i:machine)[ \t\n]+[^\s]+(?:[ \t\n]+(?i:login|account|port)[ \t\n]+[^\s]+){0,3}[ \t\n]+(?i:password)[ \t\n]+"
            + _NOT_REDACTED
            + r"(?P<netrc>[^\s]+)",
            re.MULTILINE,
        ),
        _group("secret", "secret", "netrc"),
    ),
    (
        "secret",  # a config file's password line (ini, properties, YAML, TOML, .env): the whole value, words too
        ("pass", "pwd"),
        _Judged(
            re.compile(
                r"(?m:^)[ \t]*(?:-[ \t]+)?(?:export[ \t]+)?[\"']?"
                r"(?:[\w.\-]{0,60}?(?i:password|passwd|passphrase|pwd)|[\w.\-]{1,60}?[_.\-](?i:pass))[\"']?"
                r"[ \t]*[:=][ \t]*(?P<q>[\"']?)"
                + _NOT_REDACTED
                + r"(?P<secret>[^\s\"']{4,200})(?P=q)(?:[ \t]+[#;][^\n]*)?[ \t]*$",
                re.MULTILINE,
            )
        ),
        _config_value,
    ),
    (
        "secret",  # "password" in other languages, then a value with a digit or a symbol (or quoted)
        _WORD_TRIGGERS,
        _Judged(_LANGUAGE),
        _language,
    ),
    ("secret", (" password",), _Judged(_ITALIAN_PASSWORD), _language),
    (
        "secret",
        ("pass", "pwd", "pw", "secret", "token", "credential", "creds", "key", "auth"),
        _Context,
        _group("secret"),
    ),
    (
        "secret",  # "credentials: admin s3cret!", "login: admin / s3cret!"
        ("credential", "creds", "login"),
        re.compile(
            r"(?i:credentials?|creds|login)[ \t]*(?:[:=]|is|are)[ \t]*[\w.@\-]{1,64}[ \t]*(?:[/:,]|[ \t])[ \t]*"
            r"(?:(?i:password|pw|pass)[ \t]*:?[ \t]*)?"
            + _NOT_REDACTED
            + r"(?P<secret>(?=\S*[0-9!@#$%^&*+=~?])(?=\S*[A-Za-z])[^\s,;\"'`]{6,})"
        ),
        _group("secret"),
    ),
    (
        "secret",  # the value before its name: "use `X` as the API key"
        (" as ",),
        re.compile(
            r"(?P<q>[\"'`])" + _NOT_REDACTED + r"(?P<secret>(?=[A-Za-z0-9_\-+/=.]*[0-9])(?=[A-Za-z0-9_\-+/=.]*[A-Za-z])"
            r"[A-Za-z0-9_\-+/=.]{12,200})(?P=q)[ \t]+as[ \t]+(?:(?:the|my|our|your|a|an)[ \t]+)?(?:[\w\-]+[ \t]+){0,2}"
            r"(?i:key|token|secret|password|passphrase|credentials?)\b"
        ),
        _group("secret"),
    ),
]

SECRET_KINDS: tuple[str, ...] = tuple(dict.fromkeys(kind for kind, _, _, _ in _RULES))

# Substring checks on the lower-cased text (fast C searches) decide which rules run; an
# ASCII text is checked for the ASCII ones only.
_ALL_TRIGGERS = tuple(sorted({t for _, ts, _, _ in _RULES for t in ts}))
_ASCII_TRIGGERS = tuple(t for t in _ALL_TRIGGERS if t.isascii())

# A token wrapped over two lines: a mark at the end of a line, and the next line one run of
# token characters that looks random (the rest of the token), redacted with it.
_WRAPPED = re.compile(r"(\[REDACTED:[a-z_]+\])\n[ \t]*([A-Za-z0-9_\-+/=.]{4,})(?=\s|\Z)")


def _case_switches(value: str) -> int:
    return sum(a.isupper() != b.isupper() for a, b in zip(value, value[1:]) if a.isalpha() and b.isalpha())


def _unwrap(m: re.Match[str]) -> str:
    rest = m.group(2)
    digits = any(c.isdigit() for c in rest)
    if (digits and any(c.isalpha() for c in rest)) or _case_switches(rest) >= 3:
        return m.group(1)
    return m.group()


def redact(text: str) -> tuple[str, int]:
    """(text with every recognised secret replaced by ``[REDACTED:<kind>]``, number of
    replacements). Pure, idempotent, never raises; one pass per rule whose literal
    trigger occurs in the text."""
    if not text:
        return text, 0
    source = text
    triggers = _ASCII_TRIGGERS
    if not text.isascii():
        text = _normalise(text)
        triggers = _ALL_TRIGGERS
    lowered = text.lower()
    found = {t for t in triggers if t in lowered}
    if not found:
        return source, 0
    total = 0
    for _kind, triggers, pattern, replace in _RULES:
        if found.isdisjoint(triggers):
            continue
        text, n = pattern.subn(replace, text)
        total += n
    if not total:
        return source, 0
    if "\n" in text:
        text = _WRAPPED.sub(_unwrap, text)
    return text, total
