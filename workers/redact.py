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
words. Speed: a pattern runs only when one of its literal triggers occurs in the text.
"""

from __future__ import annotations

import re
from typing import Callable

__all__ = ["redact", "KINDS", "MARK"]

MARK = "[REDACTED:{}]"

_Rule = tuple[str, tuple[str, ...], re.Pattern[str], Callable[[re.Match[str]], str]]


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
            r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
            r"[\s\S]*?(?:-----END (?P=label)-----|\Z)"
        ),
        _whole("private_key"),
    ),
    (
        "jwt",
        ("eyj",),
        re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
        _whole("jwt"),
    ),
    (
        "anthropic_key",
        ("sk-ant-",),
        re.compile(_B + r"sk-ant-[A-Za-z0-9_\-]{20,}"),
        _whole("anthropic_key"),
    ),
    (
        "openai_key",
        ("sk-",),
        re.compile(_B + r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
        _whole("openai_key"),
    ),
    (
        "stripe_key",
        ("_live_", "_test_", "whsec_"),
        re.compile(_B + r"(?:(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})"),
        _whole("stripe_key"),
    ),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
        _whole("github_token"),
    ),
    (
        "slack_token",
        ("xox", "xapp-", "hooks.slack.com"),
        re.compile(
            _B + r"(?:xox[baprs]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,}"
            r"|https://hooks\.slack\.com/services/[A-Za-z0-9/]+)"
        ),
        _whole("slack_token"),
    ),
    (
        "google_api_key",
        ("aiza",),
        re.compile(_B + r"AIza[0-9A-Za-z_\-]{35}" + _E),
        _whole("google_api_key"),
    ),
    (
        "hf_token",
        ("hf_",),
        re.compile(_B + r"hf_[A-Za-z0-9]{30,}" + _E),
        _whole("hf_token"),
    ),
    (
        "aws_access_key_id",
        ("akia", "asia"),
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
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
            r"(?<=://)[^\s:/?#@\[\]]+:" + _NOT_REDACTED
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
    (
        "secret",
        ("pass", "pwd", "secret", "token", "credential", "api_key", "api-key", "apikey",
         "access_key", "access-key", "accesskey", "private_key", "private-key", "privatekey",
         "secret_key", "secret-key", "secretkey"),
        re.compile(
            # name = value, name: value, "name": "value"; or --name value
            _NAME_START + r"(?i:" + _SECRET_NAME + r")"
            r"[\"']?\s*[:=]\s*"
            r"(?:(?P<q>[\"'])" + _NOT_REDACTED + r"(?P<quoted>[^\"'\n]{4,}?)(?P=q)"
            r"|" + _NOT_REDACTED + r"(?P<bare>"
            r"(?=[^\s\"',;]*[0-9!@#$%^&*+/=_~])[^\s\"',;)}\]]{6,}"
            r"|[A-Za-z]{16,})(?![^\s\"',;)}\]]))"
            r"|(?i:(?<![A-Za-z0-9\-])--(?:password|passwd|token|api-key|secret))\s+"
            + _NOT_REDACTED + r"(?P<flag>[^\s\"'-][^\s\"']{3,})"
        ),
        _group("secret", "quoted", "bare", "flag"),
    ),
]

KINDS: tuple[str, ...] = tuple(dict.fromkeys(kind for kind, _, _, _ in _RULES))

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
