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
  AWS key ids, Hugging Face, Mailgun, Shopify, DigitalOcean, PyPI, Vault, Databricks and
  other ``<prefix>_<random>`` provider keys; an AWS secret key (40 mixed-case base64
  characters) in a text that names AWS or holds an AWS key id.
* **Places**: the password in a URL or connection string (``scheme://user:pw@host``,
  ``redis://:pw@host``, ``Password=…;``, ``?password=…``), ``Authorization``/``Bearer``
  credentials, Azure ``AccountKey=``/``sig=``, the password of short command-line flags
  (``mysql -pX``, ``curl -u user:X``, ``sshpass -p X``, ``redis-cli -a X``).
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
  ``settings.API_KEY``, ``${TOKEN}``, ``<your-key>``, a call).

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
        ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "gloas-", "glcbt-"),
        re.compile("|".join(_lit(f"gl{p}-") + _TOKEN + "{16,}" for p in ("pat", "dt", "rt", "ptt", "ft", "soat", "oas", "cbt"))),
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
            "dp.st.",
            "sk_",
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

# Substring checks on the lower-cased text (fast C searches) decide which rules run.
_ALL_TRIGGERS = tuple(sorted({t for _, ts, _, _ in _RULES for t in ts}))

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
    if not text.isascii():
        text = _normalise(text)
    lowered = text.lower()
    found = {t for t in _ALL_TRIGGERS if t in lowered}
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
