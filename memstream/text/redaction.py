"""Secrets out of text before it is embedded or stored: ``redact(text) -> (text, count)``.

Each secret is replaced by ``[REDACTED:<kind>]``; whatever identifies without granting
access is kept (the user and host of a URL, the name in ``api_key=``, the JSON field name).
Guarantee: pure, deterministic, never raises; ``redact`` of already-redacted text changes
nothing (idempotent); text without anything that looks like a secret comes back identical
(the same string object) with count 0.

Kinds, in the order they are applied (specific shapes before generic assignments):

``private_key``   PEM private keys, ``-----BEGIN … PRIVATE KEY-----`` through its END line
                  (to the end of the text when the END line was clipped away), and the
                  ``"private_key"`` field of a GCP service-account JSON
``jwt``           ``eyJ….eyJ….<signature>``
``anthropic_key`` ``sk-ant-…``
``openai_key``    ``sk-…``, ``sk-proj-…``, ``sk-svcacct-…``, ``sk-admin-…`` (20+ characters)
``stripe_key``    ``sk_live_``, ``rk_live_``, ``sk_test_``, ``rk_test_``, ``whsec_``
``github_token``  ``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``
``slack_token``   ``xoxb-`` ``xoxa-`` ``xoxp-`` ``xoxr-`` ``xoxs-`` ``xapp-``, and Slack webhook URLs
``google_api_key````AIza`` + 35 characters
``hf_token``      ``hf_`` + 30 or more letters and digits
``aws_access_key_id`` ``AKIA``/``ASIA`` + 16 upper-case letters and digits
``aws_secret_key`` 40 base64 characters given to ``aws_secret_access_key`` (any spelling of
                  that name with ``=`` or ``:``)
``azure_key``     the value of ``AccountKey=``, ``SharedAccessKey=`` in connection strings,
                  and the ``sig=`` of a SAS URL
``url_password``  the password in ``scheme://user:password@host``
``bearer``        ``Authorization: Bearer|Basic|Token <credentials>``, and ``Bearer <token>``
                  where the token is 16+ characters with a digit
``secret``        the value of an assignment whose name is, or ends after ``_``, ``-``, ``.``
                  or a camelCase hump in, ``password``, ``passwd``,
                  ``pwd``, ``secret``, ``token``, ``api_key``/``apikey``, ``access_key``,
                  ``private_key``, ``credentials`` (``=`` or ``:``, quoted or not, also
                  ``--password x`` flags). Unquoted values must look like a secret (6+
                  characters with a digit or one of ``!@#$%^&*+/=_~``, or 16+ letters) so
                  prose such as "token: expires hourly" or "Password: Required" is left
                  alone; a plain-word password like ``password: hunter`` is missed.

Not secrets and never touched: git SHAs and other hex, UUIDs, ``max_tokens=200``, ordinary
words. Speed: a pattern runs only when one of its literal triggers occurs in the text, and
every rule is linear in the text (no input makes one re-read the rest of the text from
each of many starts: ``"token:" * n`` at 256 KiB takes milliseconds, not minutes).
Patterns start with their literal where they can (a start-of-token check placed before
the literal would be tried at every position); a PEM label is at most 40 characters.
"""

from __future__ import annotations

import re
from typing import Callable

__all__ = ["redact", "SECRET_KINDS", "MARK"]

MARK = "[REDACTED:{}]"

_Rule = tuple[str, tuple[str, ...], "re.Pattern[str] | type[_Assignments]", Callable[[re.Match[str]], str]]


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
        return s[: start - base] + mark + s[end - base:]

    return replace


_NOT_REDACTED = r"(?!\[REDACTED:)"
_B = r"(?<![A-Za-z0-9_\-])"  # start of a token (not inside a longer identifier)
_E = r"(?![A-Za-z0-9_\-])"  # end of a token

_SECRET_NAME = (
    r"(?:pass(?:word|wd|phrase)?|pwd|secret(?:[_\-]?key)?|token|api[_\-]?key|access[_\-]?key"
    r"|private[_\-]?key|credentials?)"
)
# Where a secret's name may start: a word start, after _ - . (db_password, --token), or a
# camelCase hump (clientSecret, openaiApiKey). Checked before the name, so the engine
# gives up at once on every other position.
_NAME_START = r"(?:(?<![A-Za-z0-9])|(?<=[_.\-])|(?<=[a-z0-9])(?=[A-Z]))"


_SECRET_TRIGGERS = (
    "pass", "pwd", "secret", "token", "credential", "api_key", "api-key", "apikey",
    "access_key", "access-key", "accesskey", "private_key", "private-key", "privatekey",
    "secret_key", "secret-key", "secretkey",
)
# The ``secret`` rule up to where a bare value would start: name = / name: / "name": (with
# a quoted value, which ends at the next quote or line end), or --name value. The first
# character is checked first (a set), so every other position is rejected at once.
_ASSIGNMENT = re.compile(
    r"(?=[PpTtSsAaCc\-])(?:"
    + _NAME_START + r"(?i:" + _SECRET_NAME + r")"
    r"[\"']?\s*[:=]\s*"
    r"(?:(?P<q>[\"'])" + _NOT_REDACTED + r"(?P<quoted>[^\"'\n]{4,}?)(?P=q))?"
    r"|(?i:(?<![A-Za-z0-9\-])--(?:password|passwd|token|api-key|secret))\s+"
    + _NOT_REDACTED + r"(?P<flag>[^\s\"'-][^\s\"']{3,}))"
)
_VALUE_END = re.compile(r"[\s\"',;)}\]]")  # a bare value is a run of anything else
# A bare value counts when its run, read on through ) } ], has one of these before it ends.
_SECRET_CHAR_OR_END = re.compile(r"[\s\"',;0-9!@#$%^&*+/=_~]")
_SECRET_CHARS = frozenset("0123456789!@#$%^&*+/=_~")
_LETTERS = re.compile(r"[A-Za-z]{16,}")


class _Assignments:
    r"""The ``secret`` rule as a scan with the same matches as the regular expression

        name sep (?:"quoted" | (?=[^\s"',;]*[0-9!@#…])[^\s"',;)}\]]{6,} | [A-Za-z]{16,})(?![^\s"',;)}\]])

    but linear in the text. That expression re-reads the rest of a run without a secret
    character from every name inside it (``"token:" * n`` took minutes at 256 KiB); here
    the two "where does this run end / where is its next secret character" questions are
    answered by searches that are remembered and reused by every later name in the same
    run, so each character is read a bounded number of times. No length cap: a value of
    any length is still redacted whole."""

    @staticmethod
    def subn(replace: Callable[[re.Match[str]], str], text: str) -> tuple[str, int]:
        mark = MARK.format("secret")
        parts: list[str] = []
        done = pos = count = 0
        end_memo = [-1, -1]
        char_memo = [-1, -1]
        size = len(text)
        search = _ASSIGNMENT.search
        while (m := search(text, pos)) is not None:
            start = m.end()
            if m.lastgroup is not None:  # a quoted value or a --flag value: matched whole
                parts.append(text[done:m.start()])
                parts.append(replace(m))
                done = pos = start
                count += 1
                continue
            pos = start
            if end_memo[0] <= start <= end_memo[1]:
                end = end_memo[1]
            else:
                end = _next(_VALUE_END, text, start, end_memo)
            if end - start < 6 or text.startswith("[REDACTED:", start):
                continue
            at = _next(_SECRET_CHAR_OR_END, text, start, char_memo)
            if not (at < size and text[at] in _SECRET_CHARS):
                if end - start < 16:
                    continue
                letters = _LETTERS.match(text, start)
                if letters is None or letters.end() != end:
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


def _lit(prefix: str) -> str:
    """``prefix`` at the start of a token, the check placed after the literal: a pattern
    that starts with a literal is searched for as a string, one that starts with a
    look-behind is tried at every position (about 40 times slower on plain text)."""
    return re.escape(prefix) + _after(len(prefix))


def _after(width: int) -> str:
    """After ``width`` characters just matched: they start a token (``_B`` before them)."""
    return r"(?<![A-Za-z0-9_\-](?s:.{%d}))" % width


_RULES: list[_Rule] = [
    (
        "private_key",
        ('"private_key"',),
        re.compile(r'"private_key"\s*:\s*"' + _NOT_REDACTED + r'(?P<secret>(?:[^"\\]|\\.)+)"'),
        _group("private_key"),
    ),
    (
        "private_key",
        ("private key-----",),
        re.compile(
            r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----"
            r"[\s\S]*?(?:-----END (?P=label)-----|\Z)"
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
        re.compile(
            r"[spr]k_(?:live|test)_" + _after(8) + r"[A-Za-z0-9]{16,}|" + _lit("whsec_") + r"[A-Za-z0-9]{24,}"
        ),
        _whole("stripe_key"),
    ),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"gh[pousr]_" + _after(4) + r"[A-Za-z0-9]{36,}|" + _lit("github_pat_") + r"[A-Za-z0-9_]{22,}"),
        _whole("github_token"),
    ),
    (
        "slack_token",
        ("xox", "xapp-", "hooks.slack.com"),
        re.compile(
            r"xox[baprs]-" + _after(5) + r"[A-Za-z0-9\-]{10,}|" + _lit("xapp-") + r"[A-Za-z0-9\-]{10,}"
            r"|" + _lit("https://hooks.slack.com/services/") + r"[A-Za-z0-9/]+"
        ),
        _whole("slack_token"),
    ),
    (
        "google_api_key",
        ("aiza",),
        re.compile(_lit("AIza") + r"[0-9A-Za-z_\-]{35}" + _E),
        _whole("google_api_key"),
    ),
    (
        "hf_token",
        ("hf_",),
        re.compile(_lit("hf_") + r"[A-Za-z0-9]{30,}" + _E),
        _whole("hf_token"),
    ),
    (
        "aws_access_key_id",
        ("akia", "asia"),
        re.compile(r"A[KS]IA(?<![A-Za-z0-9]A[KS]IA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        _whole("aws_access_key_id"),
    ),
    (
        "aws_secret_key",
        ("secret_access_key", "secretaccesskey", "aws_secret"),
        re.compile(
            r"(?i:aws_?secret(?:_?access)?_?key|secret_?access_?key)[\"']?\s*[:=]\s*[\"']?"
            + _NOT_REDACTED
            + r"(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        _group("aws_secret_key"),
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
        re.compile(
            r"://[^\s:/?#@\[\]]+:" + _NOT_REDACTED
            + r"(?P<secret>[^\s@/?#]+)@(?=[A-Za-z0-9\[])"
        ),
        _group("url_password"),
    ),
    (
        "bearer",
        ("authorization", "bearer"),
        re.compile(
            r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|basic|token)\s+" + _NOT_REDACTED
            + r"(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)"
            r"|(?i:bearer)\s+" + _NOT_REDACTED
            + r"(?P<token>(?=[A-Za-z0-9\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{16,}=*)"
        ),
        _group("bearer", "secret", "token"),
    ),
    ("secret", _SECRET_TRIGGERS, _Assignments, _group("secret", "quoted", "flag")),
]

SECRET_KINDS: tuple[str, ...] = tuple(dict.fromkeys(kind for kind, _, _, _ in _RULES))

# Substring checks on the lower-cased text (fast C searches) decide which rules run.
_ALL_TRIGGERS = tuple(sorted({t for _, ts, _, _ in _RULES for t in ts}))


def redact(text: str) -> tuple[str, int]:
    """(text with every recognised secret replaced by ``[REDACTED:<kind>]``, number of
    replacements). Pure, idempotent, never raises; one pass per pattern whose literal
    trigger occurs in the text."""
    if not text:
        return text, 0
    lowered = text.lower()
    found = {t for t in _ALL_TRIGGERS if t in lowered}
    if not found:
        return text, 0
    total = 0
    for _kind, triggers, pattern, replace in _RULES:
        if found.isdisjoint(triggers):
            continue
        text, n = pattern.subn(replace, text)
        total += n
    return text, total
