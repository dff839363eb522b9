"""Rule-based structured facts from a turn's text: ``extract_facts(text, speaker=...)``.

No model: regular expressions over sentences and clauses, English first, with the common
German, French, Spanish, Portuguese and Italian forms of "my name is" and "I live in".
Guarantee: pure and deterministic, never raises on any ``str``; a question (a sentence
ending in ``?``) or a conditional ("If I moved to …") yields nothing; facts come in the
order of the text, without duplicates.

A ``FactCandidate`` names what it is about as ``(subject, key)``. For a single-valued
key (``is_single_valued``) a newer value for the same pair supersedes the older one
(``name``, ``location``, ``employer``, ``decision:<topic>``, ``host`` of a named thing …);
multi-valued keys accumulate (``likes``, ``dislikes``, ``uses``, ``constraint`` …). The
facts table applies that rule; this module only proposes.

Kinds, keys and subjects:

- ``identity`` (subject ``user``): ``name``, ``location``, ``origin``, ``employer``,
  ``role``, ``nationality``, ``email``, ``phone``, ``timezone``, ``pronouns``,
  ``username``, ``website``, ``birthday``; only from the user's own text
  (``speaker="user"``), as are preferences, dislikes, tools, constraints and notes.
- ``preference`` / ``dislike`` (``user``): ``likes`` / ``dislikes``, one fact per listed
  item ("I love Rust but hate Java" gives two); ``favorite:<thing>``.
- ``tool``: ``uses``; subject ``user`` for "I use / I'm using", ``project`` for "we use",
  "our stack is", "deployed on".
- ``decision``: ``decision:<topic>`` when the decision names what it is for ("… for the
  queue" gives ``decision:queue``), else ``decision``; subject ``project`` ("we decided",
  "let's go with", "Decision: …"), ``user`` for "I decided".
- ``constraint``: ``constraint``; imperatives ("Never …", "Always …", "Don't ever …",
  "You must not …") have subject ``project``; "The API must …" has subject ``api``.
- ``value``: ``host`` (with its port), ``port``, ``url``, ``path``, ``version:<thing>``;
  the subject is the thing the sentence says it belongs to ("the staging DB is at
  db.internal:5432" gives subject ``staging db``, key ``host``). A value the sentence does
  not attribute gets subject ``project`` and key ``mention:<host|port|url|path>``.
- ``note``: "Remember that …", "Note: …", "FYI …" (``user``, key ``note``).
- Terse notation, one fact per line, ``<mark>[<target>]: <text>``: ``C`` constraint
  (subject target, key ``constraint``), ``D`` decision (``project``,
  ``decision:<target>``), ``V`` value (target, ``value``), ``?`` question (target,
  ``question``), ``✓`` done (target, ``done``), ``~`` tentative (target, ``tentative``).

The assistant's text (any other ``speaker``) yields only decisions (at lower confidence),
values and terse notation. Subjects and topics are lower-cased, without leading
articles or possessives. ``confidence`` is a fixed prior per rule (``CONFIDENCE``).
"""

from __future__ import annotations

import re
from typing import Iterator

import msgspec

from memstream.text.facts.kinds import FACT_KINDS

__all__ = ["FactCandidate", "KINDS", "CONFIDENCE", "extract_facts", "is_single_valued"]

KINDS: tuple[str, ...] = FACT_KINDS  # one list for the extractor and its readers


class FactCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """One proposed fact. ``text`` is the sentence (or terse line) it came from."""

    kind: str
    subject: str
    key: str
    value: str
    text: str
    confidence: float


CONFIDENCE: dict[str, float] = {
    "terse": 0.95,
    "name_explicit": 0.95,  # my name is, call me, je m'appelle
    "name_im": 0.7,  # I'm Marco
    "identity": 0.9,
    "role": 0.8,
    "nationality": 0.75,
    "preference": 0.8,
    "favorite": 0.9,
    "tool": 0.75,
    "decision": 0.85,
    "decision_soft": 0.7,  # let's go with, we'll go with
    "assistant_factor": 0.8,  # decisions stated by the assistant
    "constraint": 0.75,
    "value_named": 0.8,
    "value_mention": 0.5,
    "version": 0.7,
    "note": 0.8,
}

_SINGLE_KEYS = frozenset({
    "name", "location", "origin", "employer", "role", "nationality", "email", "phone",
    "timezone", "pronouns", "username", "website", "birthday",
    "host", "port", "url", "path", "value", "tentative",
})
_SINGLE_PREFIXES = ("decision:", "version:", "favorite:")


def is_single_valued(key: str) -> bool:
    """True if a newer value for the same (subject, key) replaces the older one; False
    for keys whose values accumulate (likes, dislikes, uses, constraint, bare decision,
    note, question, done, mention:*)."""
    return key in _SINGLE_KEYS or key.startswith(_SINGLE_PREFIXES)


# --------------------------------------------------------------------------- helpers

_APOS = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'", "\u00b4": "'"})
_TERSE = re.compile(
    r"^\s*(?:[-*•]\s+)?(?P<mark>[CDV?~✓✔☑✅])\[(?P<target>[^\]\n]*)\]\s*:\s*(?P<body>\S.*?)\s*$"
)
_TERSE_KIND = {
    "C": "constraint", "D": "decision", "V": "value", "?": "question", "~": "tentative",
    "✓": "done", "✔": "done", "☑": "done", "✅": "done",
}
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?…。！？])\s+")
_CONDITIONAL = re.compile(r"^(?:if|unless|suppose|supposing|imagine|what if|wenn|si)\b", re.I)
_LEADING_FILLER = re.compile(
    r"^(?:(?:so|and|but|also|oh|ok|okay|well|btw|hi|hey|hello|yes|yeah|honestly|actually|"
    r"anyway)[,!]?\s+)+",
    re.I,
)
_DETERMINERS = re.compile(r"^(?:the|a|an|our|my|your|their|its|this|that|these|those)\s+", re.I)
_TRAILING_PUNCT = " \t.,;:!?)\"'»”"

# A clause ends at these (the value before them is kept).
_VALUE_STOP = re.compile(
    r"\s*(?:[.;!?](?:\s|$)|,\s*(?:but|and|which|so|because|since|though|while|where|who|to\s+be\s+honest|"
    r"honestly|tbh|haha|lol|though|really)\b|"
    r"\s(?:because|since|but|so that|which|though|although|while|whereas|when|if|unless|"
    r"these days|right now|at the moment|for now|nowadays|lately|anymore|any more|"
    r"last (?:week|month|year)|this (?:week|month|year)|next (?:week|month|year)|"
    r"yesterday|today|recently|now|too|as\s+well|so\s+much|very\s+much|a\s+lot)\b|\s[(—–]|\s-\s|$)",
    re.I,
)
_PRONOUN_VALUE = re.compile(
    r"^(?:it|this|that|these|those|them|him|her|you|your|me|us|one|how|what|when|where|why|"
    r"who|which|whether|is|was|are|were|be|being|doing|the way|the idea|when|if|so|too|their|his|its|"
    r"very much|a lot|lots)\b",
    re.I,
)
_LIST_SPLIT = re.compile(r"\s*,\s*(?:and\s+|or\s+|&\s+)?|\s+(?:and|&|or|as well as)\s+", re.I)
_NAME_WORD = r"[^\W\d_][\w'\-]*"
_NAME_STOP = frozenset("""
not so sure going happy sorry fine good ok okay just also still here back done ready a an
the in at on from with using working trying looking afraid glad new very really gonna
about all always never thinking planning curious interested excited tired busy confused
lost stuck out over into doing having getting feeling currently now only pretty quite
totally kind sort literally basically actually probably definitely almost already
""".split())
_DEMONYMS = frozenset("""
american british english scottish welsh irish canadian australian german french spanish
italian portuguese brazilian mexican argentinian dutch belgian swiss austrian swedish
norwegian danish finnish polish czech russian ukrainian greek turkish indian pakistani
chinese japanese korean vietnamese thai filipino indonesian nigerian kenyan egyptian
israeli iranian
""".split())
_RELIGIONS = frozenset("christian catholic jewish muslim buddhist hindu atheist agnostic".split())
_ROLE_END = re.compile(
    r"\s+(?:at|for|in|with|from|who|and|on|by|since|based|living|located|working|currently|"
    r"here|there|now|but|so)\b|[,.;!(]"
)
_ROLE_STOP = re.compile(
    r"^(?:bit|little|lot|fan|big fan|huge fan|kind of|sort of|part of|member of|fan of|mix|total|huge|big|"
    r"bit of|lot of|few|couple|good|great|new|happy|little bit)\b",
    re.I,
)


def _fold_value(value: str) -> str:
    return value.strip(_TRAILING_PUNCT).strip()


def _cut_value(text: str) -> str:
    """The value that starts ``text``: up to the end of its clause."""
    m = _VALUE_STOP.search(text)
    return _fold_value(text[: m.start()] if m else text)


def _norm_subject(text: str) -> str:
    s = text.strip(_TRAILING_PUNCT).strip()
    while True:
        t = _DETERMINERS.sub("", s)
        if t == s:
            break
        s = t
    s = re.sub(r"'s\b", "", s)
    return " ".join(s.lower().split())


def _capitalized_run(text: str, max_words: int = 4, connectors: bool = True) -> str:
    """The leading run of capitalised words ("San Francisco", "Bank of America")."""
    words = text.split()
    out: list[str] = []
    for w in words:
        bare = w.strip(_TRAILING_PUNCT + "(")
        if not bare:
            break
        if bare[0].isupper() or bare[0].isdigit() and out:
            out.append(bare)
        elif connectors and out and bare.lower() in ("of", "de", "du", "del", "da", "&", "and", "am", "upon"):
            out.append(bare)
        else:
            break
        if w != bare and w.rstrip()[-1:] in ".,;:!?)":
            break
        if len(out) >= max_words:
            break
    while out and not out[-1][0].isupper():
        out.pop()
    return " ".join(out)


def _place_or_org(text: str, lowercase_ok: bool) -> str:
    """A place or organisation at the start of ``text``: capitalised words (and a
    ", Country" after them), or, in an all-lower-case message, up to three words."""
    text = _DETERMINERS.sub("", text.lstrip()) if re.match(r"(?i)the\s+[A-Z]", text.lstrip()) else text.lstrip()
    run = _capitalized_run(text)
    if run:
        after = text[text.find(run) + len(run):]
        m = re.match(r",\s*([A-Z][\w\-]+(?:\s+[A-Z][\w\-]+)?)\b(?!\s+(?:and|but)\b)", after)
        if m and not re.match(r",\s*(?:I|We|You|He|She|It|They|But|And|So)\b", after):
            run = f"{run}, {m.group(1)}"
        return run
    if lowercase_ok:
        value = _cut_value(text)
        words = value.split()
        if 0 < len(words) <= 3 and not _PRONOUN_VALUE.match(value) and not re.match(r"(?i)(?:a|an|the)\b", value):
            return value
    return ""


def _items(value: str) -> list[str]:
    """The items of a listed value ("Python, Go and Zig"); a comma that does not separate
    short items ends the value instead ("the rush, the feeling's indescribable")."""
    if "," in value and any(len(seg.split()) > 4 for seg in value.split(",")):
        value = value.split(",", 1)[0]
    out = []
    for item in _LIST_SPLIT.split(value):
        item = _LEADING_ADVERB.sub("", _fold_value(item))
        if item and not _PRONOUN_VALUE.match(item):
            out.append(item)
    return out


_LEADING_ADVERB = re.compile(r"^(?:(?:also|really|just|especially|particularly|both|either)\s+)+", re.I)


# --------------------------------------------------------------------------- rules

_W = r"(?<![\w'])"  # start of a word
_I = _W + "I"
_ADV = (
    r"(?:(?:really|also|absolutely|just|do|still|actually|genuinely|truly|kind of|kinda|totally|"
    r"definitely|mostly|mainly|usually|now|currently|always)\s+)*"
)

# (pattern, whether a lower-case name is accepted): "my name is alice" yes, "call me
# later" no.
_NAME_EXPLICIT = [
    (re.compile(_W + r"my\s+(?:full\s+|first\s+|real\s+)?name(?:\s+is|'s)\s+(?P<v>.+)", re.I), True),
    (re.compile(_W + r"call\s+me\s+(?P<v>.+)", re.I), False),
    (re.compile(_W + r"(?:mein\s+name\s+ist|ich\s+hei(?:ß|ss)e)\s+(?P<v>.+)", re.I), True),
    (re.compile(_W + r"(?:je\s+m'appelle|mon\s+nom\s+est|mon\s+pr[ée]nom\s+est)\s+(?P<v>.+)", re.I), True),
    (re.compile(_W + r"(?:me\s+llamo|mi\s+nombre\s+es)\s+(?P<v>.+)", re.I), True),
    (re.compile(_W + r"(?:meu\s+nome\s+[ée]|mi\s+chiamo|il\s+mio\s+nome\s+[èe])\s+(?P<v>.+)", re.I), True),
]
_NAME_IM = re.compile(_I + r"(?:'m|\s+am)\s+(?P<v>.+)")
_ROLE = [
    re.compile(_I + r"(?:'m|\s+am)\s+(?:now\s+|currently\s+)?(?:a|an)\s+(?P<v>.+)"),
    re.compile(_I + r"\s+(?:currently\s+|now\s+)?work\s+as\s+(?:a|an)?\s*(?P<v>.+)", re.I),
]
_EMPLOYER = [
    re.compile(_I + r"\s+(?:currently\s+|now\s+|still\s+)?work\s+(?:at|for)\s+(?P<v>.+)"),
    re.compile(_I + r"(?:'m|\s+am)\s+(?:currently\s+|now\s+)?(?:working|employed)\s+(?:at|for|by)\s+(?P<v>.+)"),
    re.compile(_I + r"\s+(?:just\s+)?joined\s+(?P<v>[A-Z].+)"),
]
_LOCATION = [
    re.compile(_I + r"\s+(?:now\s+|currently\s+|still\s+)?(?:live|reside)\s+in\s+(?P<v>.+)", re.I),
    re.compile(_I + r"(?:'m|\s+am)\s+(?:now\s+|currently\s+)?(?:based|living|located)\s+in\s+(?P<v>.+)", re.I),
    re.compile(_I + r"(?:'ve|\s+have)\s+been\s+(?:living|based)\s+in\s+(?P<v>.+)", re.I),
    re.compile(_I + r"(?:'m|\s+am)\s+(?:a|an)\s+[^,.;!?]{1,60}?\s+(?:based|living|located)\s+in\s+(?P<v>.+)", re.I),
    re.compile(
        _I + r"(?:\s+have|'ve)?\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+to\s+(?P<v>.+)", re.I
    ),
    re.compile(r"(?<![\w'])ich\s+(?:wohne|lebe)\s+(?:jetzt\s+)?in\s+(?P<v>.+)", re.I),
    re.compile(r"(?<![\w'])(?:j'habite|je\s+vis|je\s+r[ée]side)\s+(?:à|a|en|au)\s+(?P<v>.+)", re.I),
    re.compile(r"(?<![\w'])(?:vivo|resido)\s+en\s+(?P<v>.+)", re.I),
    re.compile(r"(?<![\w'])(?:moro|vivo)\s+(?:em|no|na|a|in)\s+(?P<v>.+)", re.I),
]
_ORIGIN = re.compile(_I + r"(?:'m|\s+am|\s+come)\s+(?:originally\s+)?from\s+(?P<v>.+)", re.I)
_MY_ATTR = re.compile(
    r"(?<![\w'])my\s+(?P<attr>e-?mail(?:\s+address)?|phone(?:\s+number)?|time\s*zone|pronouns|"
    r"user\s*name|github(?:\s+(?:handle|username))?|handle|website|birthday)\s+(?:is|are)\s+(?P<v>\S+)",
    re.I,
)
_ATTR_KEY = {
    "email": "email", "e-mail": "email", "phone": "phone", "timezone": "timezone",
    "pronouns": "pronouns", "username": "username", "github": "username", "handle": "username",
    "website": "website", "birthday": "birthday",
}
_PREFERENCE = re.compile(
    r"(?:^|(?<![\w']))(?:(?P<i>I)(?:\s+|(?=')))?" + _ADV
    + r"(?P<verb>love|like|prefer|enjoy|adore|dislike|hate|detest|loathe|can't\s+stand|cannot\s+stand|"
    r"can\s+not\s+stand|don't\s+(?:really\s+)?like|do\s+not\s+(?:really\s+)?like|don't\s+enjoy|"
    r"(?:'m|am)\s+not\s+(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of|(?:'m|am)\s+(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of)"
    r"\s+(?P<v>.+)"
)
_DISLIKE_VERBS = re.compile(r"^(?:dislike|hate|detest|loathe|can|cannot|don't|do\s+not|'m\s+not|am\s+not)", re.I)
_FAVORITE = re.compile(
    r"(?<![\w'])my\s+(?:all[- ]time\s+)?favou?rite\s+(?P<thing>[\w\- ]{2,30}?)\s+(?:is|are|has\s+to\s+be)\s+(?P<v>.+)",
    re.I,
)
_TOOL_USER = re.compile(
    _I + r"(?:'m|\s+am)?\s+" + _ADV + r"(?:use|using|work\s+with|code\s+in|write)\s+(?P<v>.+)"
)
_TOOL_PROJECT = [
    re.compile(
        _W + r"we(?:'re|\s+are)?\s+" + _ADV
        + r"(?:use|using|rely\s+on|build\s+(?:on|with)|built\s+on)\s+(?P<v>.+)",
        re.I,
    ),
    re.compile(_W + r"our\s+(?:tech\s+)?stack\s*(?:is|includes|consists\s+of|:)\s*(?P<v>.+)", re.I),
    re.compile(
        _W + r"(?:is|are|was|were|gets?|get|it's|we're|we|be)\s+(?:now\s+)?(?:deployed|hosted)\s+(?:on|to)\s+(?P<v>.+)",
        re.I,
    ),
    re.compile(_W + r"we\s+(?:deploy|host)\s+(?:\w+\s+)?(?:on|to)\s+(?P<v>.+)", re.I),
    re.compile(
        _W + r"(?:our|the)\s+[\w\-]+(?:\s+[\w\-]+)?\s+(?:runs|is\s+running|is\s+built|is\s+written)"
        r"\s+(?:on|in|with)\s+(?P<v>.+)",
        re.I,
    ),
]
_TOOL_TRIM = re.compile(
    r"\s+(?:for|to|in|on|at|as|with|from|via|because|since|internally|everywhere|daily|"
    r"extensively|heavily|exclusively|mostly|too|as\s+well|a\s+lot|only)\b.*$",
    re.I,
)
# (pattern, confidence name); group "who" says whose decision it is.
_DECISION = [
    (re.compile(
        _W + r"(?P<who>we|I)(?:'ve|\s+have)?\s+(?:finally\s+|just\s+|all\s+|now\s+)?(?:decided|agreed)"
        r"\s+(?:to\s+|on\s+|that\s+)?(?P<v>.+)", re.I), "decision"),
    (re.compile(
        _W + r"(?P<who>we|I)(?:'ve|\s+have)?\s+(?:finally\s+|just\s+)?(?:chose|chosen|opted\s+for|settled\s+on)"
        r"\s+(?P<v>.+)", re.I), "decision"),
    (re.compile(
        _W + r"(?P<who>let)'?s\s+(?:go\s+with|stick\s+with|stick\s+to|settle\s+on)\s+(?P<v>.+)",
        re.I), "decision_soft"),
    (re.compile(
        _W + r"(?P<who>let)'?s\s+(?P<v>(?:use|pick|choose|switch\s+to|move\s+to|adopt|migrate\s+to)\s+.+)",
        re.I), "decision_soft"),
    (re.compile(
        _W + r"(?P<who>we)(?:'ll|\s+will|'re\s+going|\s+are\s+going)\s+(?:go|going)\s+with\s+(?P<v>.+)",
        re.I), "decision_soft"),
    (re.compile(r"^(?P<who>decision|decided|we\s+decided)\s*:\s*(?P<v>.+)", re.I), "decision"),
]
_TOPIC = re.compile(r"\s+for\s+(?:the\s+|our\s+|a\s+|an\s+|all\s+)?(?P<t>[a-z][a-z\-]*(?:\s+[a-z][a-z\-]*){0,2})$")
# An imperative rule ("Never force-push", "You must not …"), unless what follows the
# adverb shows chit-chat instead ("Never done it before", "Always happy to help").
_CONSTRAINT_IMPERATIVE = re.compile(
    r"^(?:(?:please|and|also|from\s+now\s+on|going\s+forward|in\s+future|in\s+the\s+future|remember)"
    r"[,:]?\s+)*"
    r"(?P<v>(?:never|always|don't\s+ever|do\s+not\s+ever|never\s+ever|under\s+no\s+circumstances|"
    r"(?:you|we)\s+(?:must|mustn't|must\s+not|should\s+never|should\s+always|shall\s+not|may\s+not|"
    r"are\s+not\s+allowed\s+to))"
    r"\s+(?!(?:a|an|the|been|done|had|was|were|is|are|gonna|ever|again|say\s+never|be\s+so|be\s+such|"
    r"have|'ve|feel|love|know|think|mean|miss|enjoy|hear|seen|heard|felt|thought|knew|saw|got|made|went|"
    r"came|took|found|said|told|by|here|there|with|for|in|on|at|so|my|your|our|his|her|their|really|"
    r"totally|definitely|surely|happy|good|great|fun|nice|glad|up|ready|excited|interested|amazing|"
    r"awesome|cool|welcome|grateful|thankful|such|\w+ed|\w+ing)\b)\S.*)",
    re.I,
)
# "The API must stay backwards compatible", but not the guessing "must": "Max must be
# having fun", "Winning must have felt good", "You must be so proud".
_CONSTRAINT_NAMED = re.compile(
    r"^(?P<subj>(?:the|our|all|every|each)\s+[\w.]+(?:\s+[\w.]+){0,2}|[A-Z][\w.]*(?:\s+[\w.]+){0,2})\s+"
    r"(?P<modal>must|mustn't|must\s+not|should\s+never|should\s+always|shall|shall\s+not|may\s+never)\s+"
    r"(?!still\b|be\s+\w+ing\b|have\b|'ve\b|feel|love|know|think|mean|miss|"
    r"be\s+(?:the|a|an|that|because|so|very|really|pretty|such|quite|thrilled|stoked|excited|proud|happy|"
    r"glad|sad|tired|exhausted|amazing|fun|nice|great|hard|tough|awesome|exciting|cool|lovely|beautiful|"
    r"wonderful|incredible|relieved|scary|rewarding|fulfilling)\b)\S.*",
)
_CONSTRAINT_BAD_SUBJECT = frozenset("it this that there i he she they which what who you we your his her their".split())
_VERB_START = (
    r"(?:(?:also|really|absolutely|still)\s+)?(?:love|like|hate|prefer|dislike|enjoy|adore|"
    r"can't\s+stand|cannot\s+stand|don't\s+(?:really\s+)?like|detest|loathe|live|work|moved|use)\b"
)
_NOTE = re.compile(
    r"^(?:please\s+)?(?:(?:remember|note|keep\s+in\s+mind|bear\s+in\s+mind)(?:\s+that|\s*:)"
    r"|(?:fyi|for\s+the\s+record|n\.?b\.?)\s*[:,]?)\s*(?P<v>\S.+)",
    re.I,
)

# Values.
_TLDS = (
    "com|org|net|io|dev|ai|app|co|cloud|internal|local|lan|corp|home|intra|svc|cluster|"
    "tech|sh|xyz|me|info|biz|uk|de|fr|es|it|nl|eu|us|ca|jp|cn|kr|br|au|in|ru|ch|se|no|pl|"
    "pt|at|be|dk|fi|ie|nz|gov|edu|mil|site|online|systems|test|example|localdomain"
)
_URL = re.compile(
    r"(?<![\w@])(?:https?|wss?|ftp|sftp|ssh|git|s3|gs|file|postgres(?:ql)?|mysql|mariadb|redis|rediss|"
    r"mongodb(?:\+srv)?|amqps?|kafka|nats|grpc|http\+unix)://[^\s<>\"'`]+",
    re.I,
)
_HOST = re.compile(
    r"(?<![\w@./:\-])(?P<h>localhost|(?:\d{1,3}\.){3}\d{1,3}|(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)+(?:"
    + _TLDS + r"))(?P<port>:\d{2,5})?(?![\w\-]|\.[a-z0-9])",
    re.I,
)
_PATH = re.compile(
    r"(?<![\w:/.~\-\[])(?P<p>(?:~|\.{1,2})?/(?:[\w.@+\-]+/)+[\w.@+\-]*|~/[\w.@+\-]+|[A-Za-z]:\\[^\s\"'<>|]+)"
)
_PORT = re.compile(r"(?i)\bport\s+(?P<p>\d{2,5})\b")
_DIGIT = re.compile(r"\d")
_NAMED_PORT = re.compile(
    r"(?i)(?<![\w.\-])(?P<thing>(?:[\w.\-]+\s+){0,2}?[\w.\-]+)(?:'s)?\s+port"
    r"(?:\s+is\s+(?:now\s+)?|\s*[=:]\s*)(?P<p>\d{2,5})\b"
)
_VERSION_V = re.compile(r"(?<![\w.])v(?P<ver>\d+(?:\.\d+){1,3}(?:[-+][\w.]+)?)(?![\w.]|\.\d)", re.I)
_NUMBER = re.compile(r"(?<=\s)(?P<ver>\d+(?:\.\d+){0,3}(?:[-+][\w.]+)?)(?![\w%]|\.\d)")
_VERSION_THING = re.compile(r"[A-Za-z][\w+#]*(?:\.js)?")
_UNIT_AFTER = re.compile(
    r"\s*(?:%|percent|x\b|times|hours?|hrs?|h\b|minutes?|mins?|m\b|seconds?|secs?|s\b|ms\b|days?|weeks?|"
    r"months?|years?|gb|mb|kb|tb|k\b|km|miles?|kg|lbs?|dollars?|euros?|usd|eur|points?|stars?|people|users?)",
    re.I,
)
_KNOWN_TECH = frozenset("""
python node nodejs node.js java go golang rust ruby php perl scala kotlin swift dotnet .net
postgres postgresql mysql mariadb sqlite redis valkey mongodb elasticsearch opensearch kafka
rabbitmq qdrant ubuntu debian fedora centos rhel alpine macos windows ios android kubernetes
k8s docker terraform ansible helm react vue angular svelte nextjs next.js django flask fastapi
rails spring laravel express typescript ts javascript js gcc clang llvm cuda pytorch torch
tensorflow numpy pandas jdk jre openssl nginx apache envoy istio hermes memstream msgspec
pydantic celery rq
""".split())
_VERSION_STOP = frozenset("""
at in on about only is are was were be to of for and or the a an by from with after before
took takes take costs cost paid pay spent got get version v around approx approximately
over under than up down step phase page chapter section line item number no part day
week month year room level grade top rank round episode season
""".split())
# "<thing> is at|runs on|lives in|listens on port|=|:" right before a value.
_OWNER_VERB = re.compile(
    r"(?:\s(?:(?:is|are|was|were)(?:\s+now)?(?:\s+(?:running|hosted|reachable|served|available|located|"
    r"stored|kept|deployed|listening|exposed|written|saved|mounted|installed|cached|uploaded|published))?"
    r"|lives?|runs?|listens?|sits?|moved|points?|resolves?|serves?|is\s+set\s+to|defaults?\s+to|changed\s+to)"
    r"(?:\s+(?:at|on|in|under|to|from|as))?(?:\s+port)?|\s*[:=])\s*$",
    re.I,
)
_THING_STOP = frozenset("""
the a an our my your their its this that these those and but so then now check also whether
if since because i we you it he she they there here please see just still which what who
when where why how is are was were be been to of for in on at by with from as
""".split())
_THING_GENERIC_TAIL = frozenset("url uri host hostname address endpoint port".split())
_OWNER_WINDOW = 120  # characters before a value searched for what it belongs to


def _sentences(text: str) -> Iterator[str]:
    for line in text.splitlines():
        for s in _SENTENCE_SPLIT.split(line):
            s = s.strip()
            if s:
                yield s


_CLAUSE_SPLIT = re.compile(
    r"\s*(?:[;,]\s*)?\b(?:but|and|although|though|while|whereas|et|y|und|e)\s+"
    r"(?=(?:I|j'|je|ich|vivo|me\s+llamo)\b|" + _VERB_START + r")"
)
_STARTS_WITH_VERB = re.compile(_VERB_START)
_HAS_I_SUBJECT = re.compile(r"(?:^|[\s,;:])I(?:\s|')")


def _clauses(sentence: str) -> list[str]:
    """Clauses of a sentence, split at conjunctions that start a new statement by the
    same speaker: "I love Rust but hate Java" -> "I love Rust", "I hate Java". A clause
    without a subject inherits "I" only from a clause that had it."""
    out: list[str] = []
    for part in _CLAUSE_SPLIT.split(sentence):
        part = part.strip()
        if not part:
            continue
        if out and _STARTS_WITH_VERB.match(part):
            if not _HAS_I_SUBJECT.search(out[-1]):
                continue  # "... exercise and enjoy nature": not a statement about the user
            part = "I " + part
        out.append(part)
    return out or [sentence]


class _Out:
    def __init__(self) -> None:
        self.facts: list[FactCandidate] = []
        self._seen: dict[tuple[str, str, str, str], int] = {}

    def add(self, kind: str, subject: str, key: str, value: str, text: str, confidence: float) -> None:
        value = _fold_value(value)
        if not value or not subject or not key:
            return
        ident = (kind, subject, key, value.casefold())
        fact = FactCandidate(
            kind=kind, subject=subject, key=key, value=value, text=text, confidence=round(confidence, 3)
        )
        at = self._seen.get(ident)
        if at is None:
            self._seen[ident] = len(self.facts)
            self.facts.append(fact)
        elif self.facts[at].confidence < fact.confidence:
            self.facts[at] = fact


# Cheap gates: a rule group runs only on sentences that contain one of its words.
_MAY_BE_PERSONAL = re.compile(
    r"(?<![\w'])(?:(?:I|i|[Mm]y|[Ww]e|[Oo]ur|[Cc]all|deployed|hosted|[Ii]ch|[Jj]e|[Mm]e|[Mm]i|[Mm]ein|[Mm]on|"
    r"[Mm]eu|[Vv]ivo|[Mm]oro|[Ii]l|love|like|hate|enjoy|prefer)(?!\w)|[Jj]')"
)
_DECISION_WORDS = ("decid", "decision", "agreed", "chose", "opted", "settled", "let", "go with", "going with")
_MAY_BE_VALUE = re.compile(r"[0-9/\\]|://|localhost|\.[A-Za-z]")


def extract_facts(text: str, *, speaker: str = "user") -> list[FactCandidate]:
    """Facts stated in ``text``, in order, without duplicates. Only ``speaker="user"``
    yields identity, preferences, tools, constraints and notes; anyone's text yields
    decisions, values and terse notation. Pure, deterministic, never raises on a str."""
    if not text or not isinstance(text, str):
        return []
    out = _Out()
    user = speaker == "user"
    text = text.translate(_APOS)
    prose: list[str] = []
    for line in text.splitlines():
        m = _TERSE.match(line)
        if m is None:
            prose.append(line)
            continue
        _terse(m, line.strip(), out)
    for sentence in _sentences("\n".join(prose)):
        if sentence.endswith("?") or sentence.endswith("？"):
            continue
        body = _LEADING_FILLER.sub("", sentence)
        if _CONDITIONAL.match(body):
            continue
        if user:
            if _MAY_BE_PERSONAL.search(body):
                clauses = _clauses(body)
                _identity(clauses, sentence, out)
                _preferences(clauses, sentence, out)
                _tools(clauses, sentence, out)
            _constraints(body, sentence, out)
            _notes(body, sentence, out)
        lowered = body.lower()
        if any(w in lowered for w in _DECISION_WORDS):
            _decisions(body, sentence, out, user)
        if _MAY_BE_VALUE.search(sentence):
            _values(sentence, out)
    return out.facts


def _terse(m: re.Match[str], line: str, out: _Out) -> None:
    kind = _TERSE_KIND[m.group("mark")]
    target = _norm_subject(m.group("target"))
    body = m.group("body")
    conf = CONFIDENCE["terse"]
    if kind == "decision":
        out.add(kind, "project", f"decision:{target}" if target else "decision", body, line, conf)
    else:
        out.add(kind, target or "project", kind, body, line, conf)  # the key is named as the kind


def _name_value(raw: str, explicit: bool) -> str:
    words = raw.split()
    if not words:
        return ""
    first = words[0].strip(_TRAILING_PUNCT)
    if not first or not re.match(_NAME_WORD + "$", first):
        return ""
    if first.lower() in _NAME_STOP or first.lower() in _DEMONYMS or first.lower() in _RELIGIONS:
        return ""
    if not first[0].isupper():
        if not explicit:
            return ""
        # "my name is alice": accept one lower-case word, reported as typed.
        return first
    return _capitalized_run(raw, max_words=3, connectors=False)


def _identity(clauses: list[str], sentence: str, out: _Out) -> None:
    lowercase_ok = sentence == sentence.lower()
    for clause in clauses:
        for rx, lowercase_name in _NAME_EXPLICIT:
            m = rx.search(clause)
            if m and _speaker_owns(clause, m.start()):
                v = _name_value(m.group("v"), explicit=lowercase_name)
                if v:
                    out.add("identity", "user", "name", v, sentence, CONFIDENCE["name_explicit"])
        m = _NAME_IM.search(clause)
        if m:
            raw = m.group("v")
            first = raw.split()[0].strip(_TRAILING_PUNCT).lower() if raw.split() else ""
            if first in _DEMONYMS:
                out.add("identity", "user", "nationality", first.capitalize(), sentence, CONFIDENCE["nationality"])
            else:
                v = _name_value(raw, explicit=False)
                if v:
                    out.add("identity", "user", "name", v, sentence, CONFIDENCE["name_im"])
        for rx in _ROLE:
            m = rx.search(clause)
            if m:
                raw = m.group("v")
                role = _ROLE_END.split(raw, maxsplit=1)[0].strip()
                if role and not _ROLE_STOP.match(role) and len(role.split()) <= 4 and not _PRONOUN_VALUE.match(role):
                    out.add("identity", "user", "role", role, sentence, CONFIDENCE["role"])
                    rest = raw[len(role):]
                    e = re.match(r"\s+(?:at|for)\s+(?P<v>.+)", rest)
                    if e:
                        org = _place_or_org(e.group("v"), lowercase_ok)
                        if org:
                            out.add("identity", "user", "employer", org, sentence, CONFIDENCE["identity"])
                fan = re.match(r"(?i)(?:big\s+|huge\s+)?fan\s+of\s+(?P<v>.+)", raw)
                if fan and not _PRONOUN_VALUE.match(fan.group("v")):
                    for item in _items(_cut_value(fan.group("v"))):
                        out.add("preference", "user", "likes", item, sentence, CONFIDENCE["preference"])
        for rx in _EMPLOYER:
            m = rx.search(clause)
            if m:
                org = _place_or_org(m.group("v"), lowercase_ok)
                if org:
                    out.add("identity", "user", "employer", org, sentence, CONFIDENCE["identity"])
                    after = m.group("v")[m.group("v").find(org) + len(org):]
                    r = re.match(r"\s+as\s+(?:a|an)\s+(?P<v>.+)", after)
                    role = _ROLE_END.split(r.group("v"), maxsplit=1)[0].strip() if r else ""
                    if role and not _ROLE_STOP.match(role) and len(role.split()) <= 4:
                        out.add("identity", "user", "role", role, sentence, CONFIDENCE["role"])
        for rx in _LOCATION:
            m = rx.search(clause)
            if m:
                place = _place_or_org(m.group("v"), lowercase_ok)
                if place:
                    out.add("identity", "user", "location", place, sentence, CONFIDENCE["identity"])
        m = _ORIGIN.search(clause)
        if m:
            place = _place_or_org(m.group("v"), lowercase_ok)
            if place:
                out.add("identity", "user", "origin", place, sentence, CONFIDENCE["identity"])
        for m in _MY_ATTR.finditer(clause):
            attr = re.sub(r"\s+", "", m.group("attr").lower()).replace("address", "").replace("number", "")
            attr = re.sub(r"(?:handle|username)$", "", attr) if attr.startswith("github") else attr
            key = _ATTR_KEY.get(attr, attr)
            out.add("identity", "user", key, m.group("v"), sentence, CONFIDENCE["identity"])


def _speaker_owns(clause: str, at: int) -> bool:
    """"my name is X" is the user's own name, not "my friend's name is X"."""
    before = clause[:at].rstrip().lower()
    return not re.search(r"(?:'s|s')$", before)


_I_LEAD = re.compile(
    r"(?:^|[,;:!\-—–]\s*|\b(?:and|but|so|because|cause|since|honestly|personally|also|really|"
    r"yeah|yes|oh|well|still|now|lol|though|although)\s+)$",
    re.I,
)
_MAX_ITEM_WORDS = 6


def _preferences(clauses: list[str], sentence: str, out: _Out) -> None:
    for clause in clauses:
        m = _FAVORITE.search(clause)
        if m:
            thing = _norm_subject(m.group("thing"))
            value = _cut_value(m.group("v"))
            if thing and value and not _PRONOUN_VALUE.match(value):
                out.add("preference", "user", f"favorite:{thing}", value, sentence, CONFIDENCE["favorite"])
            continue
        m = _PREFERENCE.search(clause)
        if not m or not m.group("i") or not _I_LEAD.search(clause[: m.start("i")]):
            continue  # no "I", or "the things I love ..." (a relative clause)
        verb = " ".join(m.group("verb").split()).lower()
        raw = m.group("v")
        if re.match(r"(?i)to\s+", raw):
            raw = re.split(r"\s*,", raw[3:], maxsplit=1)[0]
        value = _cut_value(raw)
        if not value or _PRONOUN_VALUE.match(value):
            continue
        if verb == "prefer":
            value = re.split(r"(?i)\s+(?:over|to|rather\s+than|instead\s+of)\s+", value, maxsplit=1)[0]
        dislike = ("fan of" in verb and "not" in verb) or ("fan of" not in verb and bool(_DISLIKE_VERBS.match(verb)))
        kind, key = ("dislike", "dislikes") if dislike else ("preference", "likes")
        for item in _items(value):
            if len(item.split()) <= _MAX_ITEM_WORDS:
                out.add(kind, "user", key, item, sentence, CONFIDENCE["preference"])


def _tools(clauses: list[str], sentence: str, out: _Out) -> None:
    for clause in clauses:
        m = _TOOL_USER.search(clause)
        if m:
            _add_tools("user", m.group("v"), sentence, out)
        for rx in _TOOL_PROJECT:
            m = rx.search(clause)
            if m:
                _add_tools("project", m.group("v"), sentence, out)
                break


def _add_tools(subject: str, raw: str, sentence: str, out: _Out) -> None:
    value = _cut_value(raw)
    for item in _items(value):
        item = _TOOL_TRIM.sub("", item).strip()
        item = _DETERMINERS.sub("", item) if re.match(r"(?i)the\s+[A-Z]", item) else item
        if not item or _PRONOUN_VALUE.match(item) or len(item.split()) > 3:
            continue
        if not any(ch.isupper() or ch.isdigit() for ch in item) and item.lower() not in _KNOWN_TECH:
            continue  # "we use tabs": keep only names of things, not common nouns
        out.add("tool", subject, "uses", item, sentence, CONFIDENCE["tool"])


def _decisions(body: str, sentence: str, out: _Out, user: bool) -> None:
    for rx, conf_name in _DECISION:
        m = rx.search(body)
        if not m:
            continue
        who = m.group("who").lower()
        if who == "i" and not user:
            continue
        value = _cut_decision(m.group("v"))
        if not value or _PRONOUN_VALUE.match(value):
            continue
        topic = _TOPIC.search(value)
        key = f"decision:{_norm_subject(topic.group('t'))}" if topic else "decision"
        conf = CONFIDENCE[conf_name] * (1.0 if user else CONFIDENCE["assistant_factor"])
        out.add("decision", "user" if who == "i" else "project", key, value, sentence, conf)
        return


_DECISION_STOP = re.compile(
    r"\s*(?:[.;!?](?:\s|$)|,\s*(?:but|so|because|since|which|who|considering)\b|\s(?:because|since|so that)\b"
    r"|\s[(—–]|\s-\s|$)"
)


def _cut_decision(raw: str) -> str:
    m = _DECISION_STOP.search(raw)
    return _fold_value(raw[: m.start()] if m else raw)


def _constraints(body: str, sentence: str, out: _Out) -> None:
    m = _CONSTRAINT_IMPERATIVE.match(body)
    if m:
        out.add("constraint", "project", "constraint", m.group("v"), sentence, CONFIDENCE["constraint"])
        return
    m = _CONSTRAINT_NAMED.match(body)
    if m:
        subj = _norm_subject(m.group("subj"))
        if subj and not set(subj.split()) & _CONSTRAINT_BAD_SUBJECT:
            out.add("constraint", subj, "constraint", body, sentence, CONFIDENCE["constraint"])


def _notes(body: str, sentence: str, out: _Out) -> None:
    m = _NOTE.match(body)
    if m:
        out.add("note", "user", "note", m.group("v"), sentence, CONFIDENCE["note"])


def _owner(sentence: str, start: int) -> str:
    """What the sentence says the value at ``start`` belongs to: "the staging DB is at …"
    -> "staging db"; "the Grafana URL is …" -> "grafana"; "" when it does not say."""
    prefix = sentence[max(0, start - _OWNER_WINDOW):start]
    m = _OWNER_VERB.search(prefix)
    if not m:
        return ""
    kept: list[str] = []
    for w in reversed(prefix[: m.start()].split()[-4:]):
        if w.lower() in _THING_STOP or not _THING_WORD.fullmatch(w):
            break
        kept.insert(0, w)
    if len(kept) > 1 and kept[-1].lower() in _THING_GENERIC_TAIL:
        kept = kept[:-1]
    subject = _norm_subject(" ".join(kept))
    if not subject or subject in _THING_STOP:
        return ""
    return subject


_THING_WORD = re.compile(r"[\w.\-]+")


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the given (sorted, disjoint) spans replaced by spaces: values already
    taken (a URL) are not found again by later patterns (its host, its path)."""
    if not spans:
        return text
    parts, pos = [], 0
    for a, b in spans:
        parts.append(text[pos:a])
        parts.append(" " * (b - a))
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


def _values(sentence: str, out: _Out) -> None:
    masked = sentence
    found: list[tuple[int, str, str]] = []  # (start, type, value)

    spans = []
    lowered = sentence.lower()
    has_digit = _DIGIT.search(sentence) is not None
    for m in (_URL.finditer(masked) if "://" in sentence else ()):
        url = m.group().rstrip(".,;:!?)]}'\"")
        found.append((m.start(), "url", url))
        spans.append((m.start(), m.start() + len(url)))
    masked, spans = _blank(masked, spans), []
    for m in (_HOST.finditer(masked) if "." in masked or "localhost" in lowered else ()):
        if m.group("h").lower() == "localhost" and not m.group("port"):
            continue
        found.append((m.start(), "host", m.group()))
        spans.append(m.span())
    masked, spans = _blank(masked, spans), []
    for m in (_PATH.finditer(masked) if "/" in masked or "\\" in masked else ()):
        path = m.group("p").rstrip(".,;:!?)")
        found.append((m.start("p"), "path", path))
        spans.append((m.start("p"), m.start("p") + len(path)))
    masked, spans = _blank(masked, spans), []
    named_ports: list[tuple[int, str, str]] = []
    has_port = "port" in lowered
    for m in (_NAMED_PORT.finditer(masked) if has_port else ()):
        thing = _norm_subject(m.group("thing"))
        if thing and thing.split()[-1] not in _THING_STOP:
            named_ports.append((m.start(), thing, m.group("p")))
            spans.append(m.span())
    masked, spans = _blank(masked, spans), []
    for m in (_PORT.finditer(masked) if has_port else ()):
        found.append((m.start(), "port", m.group("p")))
        spans.append(m.span())
    masked, spans = _blank(masked, spans), []
    versions: list[tuple[int, str, str]] = []
    if not has_digit:
        masked = ""  # no digits: no versions
    for m in _VERSION_V.finditer(masked):
        thing = _version_thing(masked[max(0, m.start() - 60): m.start()])
        versions.append((m.start(), thing, m.group("ver")))
        spans.append(m.span())
    masked = _blank(masked, spans)
    lead = len(masked) - len(masked.lstrip())
    for m in _NUMBER.finditer(masked):  # "<Thing> [version] <number>"
        ver = m.group("ver")
        words = masked[max(0, m.start() - 40): m.start()].split()
        if words and words[-1].lower() == "version":
            words.pop()
        if not words or not _VERSION_THING.fullmatch(words[-1]) or _UNIT_AFTER.match(masked, m.end()):
            continue
        thing = words[-1]
        low = thing.lower()
        if low in _VERSION_STOP:
            continue
        start = masked.rfind(thing, 0, m.start())
        if low not in _KNOWN_TECH and ("." not in ver or not thing[0].isupper() or start == lead):
            continue  # "Took 3.5 hours", "at 2.5": a number, not a version
        versions.append((start, low, ver))
    for _start, thing, port in named_ports:
        out.add("value", thing, "port", port, sentence, CONFIDENCE["value_named"])
    for start, kind, value in sorted(found):
        subject = _owner(sentence, start)
        if subject:
            out.add("value", subject, kind, value, sentence, CONFIDENCE["value_named"])
        else:
            out.add("value", "project", f"mention:{kind}", value, sentence, CONFIDENCE["value_mention"])
    for _start, thing, ver in sorted(versions):
        key = f"version:{thing}" if thing else "mention:version"
        out.add("value", "project", key, ver, sentence, CONFIDENCE["version"] if thing else CONFIDENCE["value_mention"])


def _version_thing(prefix: str) -> str:
    """What a "v2.3.1" belongs to: the nearest word before it, skipping to/from/at/is."""
    words = re.findall(r"[A-Za-z][\w+#.\-]*", prefix)
    for w in reversed(words[-3:]):
        low = w.lower()
        if low in ("to", "from", "at", "is", "version", "on", "of", "was", "now"):
            continue
        if low in _VERSION_STOP or low in _THING_STOP:
            return ""
        return low
    return ""
