"""Which turns are not worth projecting: acknowledgements, near-empty turns, scaffolding.

``BoilerplateFilter(config).reason(text)`` returns ``None`` for a substantive turn, or a
short reason for one to skip, for counting: ``"scaffolding"``, ``"ack"``, ``"too_short"``
(checked in that order). ``clean(text)`` returns the user's own words with Hermes's
scaffolding removed; a worker projects ``clean(text)``, and only when ``reason(text)`` is
None. Both are pure, never raise, and need no network or model.

The rules, all explicit:

- **scaffolding** (what Hermes writes into a user turn, not what the user typed):
  1. a skill invocation: text starting ``[IMPORTANT: The user has invoked the `` (Hermes
     0.19 ``agent/skill_commands.py``). ``clean`` keeps only the user's instruction that
     came with it (the same extraction Hermes does before ``sync_turn``); a bare
     invocation leaves nothing, so the turn is scaffolding;
  2. injected notes: a block starting a line with one of ``INJECTED_PREFIXES``
     (``[System note: …]``, ``[Runtime note: …]``, ``[CONTEXT COMPACTION …]``,
     ``<memory-context>…</memory-context>`` …), up to its closing bracket or tag, is
     removed; a turn that was nothing else is scaffolding;
  3. a bare slash command: one line ``/name`` (letters, digits, ``-``, ``_``), whose
     arguments, if any, are themselves not substantive (``/new``, ``/model gpt-4o``);
     ``/plan move the staging database to Postgres 16`` is substantive, and ``/etc/hosts``
     is a path, not a command.
- **ack**: the turn is only acknowledgement phrases (``ACK_PHRASES`` plus the configured
  extras), in any case, with any punctuation, emoji or accents, possibly repeated or
  chained (``"ok thanks!!"``, ``"好的谢谢"``, ``"Merci beaucoup 🙏"``), or only emoji.
- **too_short**: fewer than ``min_chars`` characters of content (punctuation and symbols
  removed, runs of spaces counted once; a Chinese, Japanese or Korean character counts
  ``cjk_weight`` times, since those scripts are dense).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memstream.text.scripts import CJK_RE

__all__ = [
    "BoilerplateConfig",
    "BoilerplateFilter",
    "ACK_PHRASES",
    "INJECTED_PREFIXES",
    "SCAFFOLDING",
    "ACK",
    "TOO_SHORT",
    "REASONS",
    "user_instruction",
]

SCAFFOLDING = "scaffolding"
ACK = "ack"
TOO_SHORT = "too_short"
REASONS = (SCAFFOLDING, ACK, TOO_SHORT)

ACK_PHRASES: tuple[str, ...] = (
    # English: acknowledgements, assent, refusal, go-aheads, thanks, greetings, fillers.
    "ok",
    "okay",
    "okey",
    "okie",
    "k",
    "kk",
    "alright",
    "all right",
    "right",
    "thanks",
    "thank you",
    "thx",
    "ty",
    "tysm",
    "cheers",
    "many thanks",
    "thanks a lot",
    "continue",
    "go on",
    "go ahead",
    "carry on",
    "keep going",
    "proceed",
    "next",
    "yes",
    "yeah",
    "yep",
    "yup",
    "ya",
    "no",
    "nope",
    "nah",
    "sure",
    "of course",
    "got it",
    "gotcha",
    "understood",
    "roger",
    "noted",
    "agreed",
    "exactly",
    "indeed",
    "cool",
    "great",
    "nice",
    "awesome",
    "perfect",
    "good",
    "fine",
    "done",
    "excellent",
    "lgtm",
    "looks good",
    "sounds good",
    "that works",
    "works for me",
    "makes sense",
    "np",
    "no problem",
    "no worries",
    "lol",
    "haha",
    "hehe",
    "wow",
    "oh",
    "ah",
    "hmm",
    "hi",
    "hello",
    "hey",
    "bye",
    "please",
    "pls",
    "plz",
    "again",
    "so much",
    "very much",
    "a lot",
    "man",
    "mate",
    "too",
    "you too",
    "thats",
    "that is",
    "it",
    "now",
    # German
    "danke",
    "danke schön",
    "dankeschön",
    "danke sehr",
    "vielen dank",
    "weiter",
    "mach weiter",
    "ja",
    "nein",
    "genau",
    "alles klar",
    "gut",
    "super",
    "klar",
    "passt",
    "bitte",
    # French
    "merci",
    "merci beaucoup",
    "d'accord",
    "oui",
    "non",
    "continue",
    "continuez",
    "vas-y",
    "allez-y",
    "parfait",
    "très bien",
    "bien",
    "ça marche",
    "entendu",
    "s'il te plaît",
    "s'il vous plaît",
    # Spanish
    "gracias",
    "muchas gracias",
    "vale",
    "sí",
    "sigue",
    "continúa",
    "claro",
    "de acuerdo",
    "perfecto",
    "bueno",
    "listo",
    "dale",
    "por favor",
    # Portuguese
    "obrigado",
    "obrigada",
    "muito obrigado",
    "muito obrigada",
    "valeu",
    "sim",
    "não",
    "certo",
    "beleza",
    # Italian
    "grazie",
    "grazie mille",
    "va bene",
    "continua",
    "perfetto",
    "prego",
    "vai",
    # Japanese
    "ありがとう",
    "ありがとうございます",
    "どうも",
    "はい",
    "いいえ",
    "続けて",
    "続けてください",
    "了解",
    "了解です",
    "りょうかい",
    "うん",
    "お願いします",
    "よろしく",
    "大丈夫",
    "わかりました",
    "分かりました",
    # Chinese
    "谢谢",
    "谢谢你",
    "多谢",
    "好的",
    "好",
    "继续",
    "是的",
    "是",
    "对",
    "嗯",
    "收到",
    "明白",
    "可以",
    "行",
    "没问题",
    # Korean
    "감사합니다",
    "고마워",
    "고마워요",
    "고맙습니다",
    "네",
    "예",
    "아니요",
    "계속",
    "계속해",
    "계속해줘",
    "계속해 주세요",
    "알겠습니다",
    "알겠어",
    "좋아",
    "좋아요",
    "응",
    "오케이",
    "ㅇㅋ",
    "ㅋㅋ",
)

# Blocks Hermes 0.19 writes into a user turn (gateway/run.py, agent/memory_manager.py,
# agent/context_compressor.py); removed by ``clean`` when they start a line.
INJECTED_PREFIXES: tuple[str, ...] = (
    "[System:",
    "[System note:",
    "[Runtime note:",
    "[Note: model was just switched",
    "[Note: Some earlier conversation turns have been compacted",
    "[CONTEXT COMPACTION",
    "[IMPORTANT: Background process",
    "[IMPORTANT: MCP servers",
    "<memory-context>",
)

# Hermes 0.19 agent/skill_commands.py, byte for byte.
_SKILL_PREFIX = "[IMPORTANT: The user has invoked the "
_SINGLE_SKILL_MARKER = "The full skill content is loaded below.]"
_SINGLE_SKILL_INSTRUCTION = "The user has provided the following instruction alongside the skill invocation: "
_RUNTIME_NOTE = "\n\n[Runtime note:"
_BUNDLE_MARKER = " skill bundle,"
_BUNDLE_USER_INSTRUCTION = "\nUser instruction: "
_BUNDLE_FIRST_SKILL_BLOCK = "\n\n[Loaded as part of the "

_SLASH_COMMAND = re.compile(r"/[A-Za-z][\w-]*(?=\s|$)")
_INJECTED_START = re.compile(r"(?m)^[ \t]*(?P<block>" + "|".join(re.escape(p) for p in INJECTED_PREFIXES) + ")")
_APOSTROPHES = str.maketrans("", "", "'\u2019\u02bc`\u00b4")
_ASCII_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_AMBIGUOUS_ACK_LEN = 100  # folded characters; anything longer is never an ack


def user_instruction(text: str) -> str | None:
    """The user's instruction inside a Hermes skill invocation; ``text`` unchanged if it is
    not one; None for a bare invocation. Mirrors Hermes 0.19's own extraction; never raises."""
    if not text.startswith(_SKILL_PREFIX):
        return text
    if _BUNDLE_MARKER in text:
        at = text.find(_BUNDLE_USER_INSTRUCTION)
        if at < 0:
            return None
        rest = text[at + len(_BUNDLE_USER_INSTRUCTION) :]
        end = rest.find(_BUNDLE_FIRST_SKILL_BLOCK)
    elif _SINGLE_SKILL_MARKER in text:
        at = text.rfind(_SINGLE_SKILL_INSTRUCTION)
        if at < 0:
            return None
        rest = text[at + len(_SINGLE_SKILL_INSTRUCTION) :]
        end = rest.find(_RUNTIME_NOTE)
    else:
        return None
    if end >= 0:
        rest = rest[:end]
    return rest.strip() or None


def _fold(text: str) -> str:
    """Case-, accent-, punctuation- and emoji-insensitive form: letters and digits only,
    words separated by single spaces, apostrophes dropped (``d'accord`` -> ``daccord``)."""
    if text.isascii():  # same result, without a per-character Unicode lookup
        return " ".join(_ASCII_NON_ALNUM.sub(" ", text.casefold().translate(_APOSTROPHES)).split())
    text = unicodedata.normalize("NFKD", text.casefold()).translate(_APOSTROPHES)
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in "LN":
            out.append(ch)
        elif cat != "Mn":
            out.append(" ")
    return " ".join("".join(out).split())


def _end_of_block(text: str, start: int) -> int:
    """Index just past the injected block that starts at ``start``: its closing bracket
    (nesting respected) or ``</memory-context>``; the end of text if it never closes."""
    if text.startswith("<memory-context>", start):
        end = text.find("</memory-context>", start)
        return len(text) if end < 0 else end + len("</memory-context>")
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _strip_injected(text: str) -> str:
    if "[" not in text and "<memory-context>" not in text:
        return text
    parts = []
    pos = 0
    while True:
        m = _INJECTED_START.search(text, pos)
        if m is None:
            parts.append(text[pos:])
            break
        parts.append(text[pos : m.start()])
        pos = _end_of_block(text, m.start("block"))
    return "".join(parts).strip()


@dataclass(frozen=True)
class BoilerplateConfig:
    """What ``BoilerplateFilter`` skips. ``min_chars=0`` turns the length floor off;
    ``enabled=False`` turns the whole filter off (every turn is substantive)."""

    enabled: bool = True
    min_chars: int = 12
    cjk_weight: int = 3
    extra_phrases: tuple[str, ...] = ()
    acks: bool = True
    scaffolding: bool = True


class BoilerplateFilter:
    """Decides, per turn text, whether it is worth projecting. Pure and thread-safe."""

    def __init__(self, config: BoilerplateConfig | None = None) -> None:
        self.config = config or BoilerplateConfig()
        phrases = {_fold(p) for p in ACK_PHRASES + tuple(self.config.extra_phrases)}
        phrases |= {p.replace(" ", "") for p in phrases}  # "thank you" -> also "thankyou"
        phrases.discard("")
        self._phrases = frozenset(phrases)
        self._longest = max((len(p) for p in phrases), default=0)

    def clean(self, text: str) -> str:
        """The user's own words: skill scaffolding reduced to the user's instruction,
        injected Hermes notes removed, outer whitespace stripped; "" if nothing is left.
        Text without scaffolding comes back stripped and otherwise unchanged."""
        if not text:
            return ""
        if not (self.config.enabled and self.config.scaffolding):
            return text.strip()
        instruction = user_instruction(text.lstrip())
        if instruction is None:
            return ""
        return _strip_injected(instruction).strip()

    def reason(self, text: str) -> str | None:
        """None if ``text`` is worth projecting, else ``"scaffolding"``, ``"ack"`` or
        ``"too_short"``. Judges ``clean(text)``, so ``reason(text)`` is None exactly when
        ``reason(clean(text))`` is None. Never raises."""
        cfg = self.config
        if not cfg.enabled:
            return None
        cleaned = self.clean(text)
        if cfg.scaffolding:
            if not cleaned and text.strip():
                return SCAFFOLDING
            if cleaned.startswith("/") and "\n" not in cleaned:
                m = _SLASH_COMMAND.match(cleaned)
                if m is not None:
                    args = cleaned[m.end() :].strip()
                    if not args or self._judge(args) is not None:
                        return SCAFFOLDING
        return self._judge(cleaned)

    def _judge(self, text: str) -> str | None:
        cfg = self.config
        folded = _fold(text)
        if cfg.acks:
            if not folded:
                if any(unicodedata.category(ch) in ("So", "Sk") for ch in text):
                    return ACK  # emoji only: 👍 🙏
            elif len(folded) <= _AMBIGUOUS_ACK_LEN and self._only_phrases(folded):
                return ACK
        if cfg.min_chars > 0:
            # NFC: folding decomposed Hangul syllables into jamo; count syllables.
            dense = 0 if folded.isascii() else len(CJK_RE.findall(unicodedata.normalize("NFC", folded)))
            if dense:
                folded = unicodedata.normalize("NFC", folded)
            if len(folded) + dense * (cfg.cjk_weight - 1) < cfg.min_chars:
                return TOO_SHORT
        return None

    def _only_phrases(self, folded: str) -> bool:
        """``folded`` is a sequence of acknowledgement phrases. A Latin phrase must end at
        a space, the end, or a CJK character ("nook" is not "no" + "ok")."""
        n = len(folded)
        reachable = [False] * (n + 1)
        reachable[0] = True
        for i in range(n):
            if not reachable[i]:
                continue
            if folded[i] == " ":
                reachable[i + 1] = True
                continue
            for j in range(i + 1, min(n, i + self._longest) + 1):
                if reachable[j] or folded[i:j] not in self._phrases:
                    continue
                if j == n or folded[j] == " " or CJK_RE.match(folded, j) or CJK_RE.match(folded, j - 1):
                    reachable[j] = True
        return reachable[n]
