"""The regular expressions of the fact rules, by family: the terse notation, the shape of a
value (where it ends, whether it is a pronoun, how a list splits), identity ("my name is",
"I live in", "I work at" and their German, French, Spanish, Portuguese and Italian
forms), preferences, tools, decisions, constraints, notes, and values (URLs, hosts,
paths, ports, versions, and what a value belongs to).

Each pattern is compiled once, when ``memstream.text.facts`` is first imported. The
patterns a clause is read with by the dozen (identity, preferences, tools) are ``Gated``:
each with words one of which a text must contain for it to match, looked for before the
pattern scans (an exact shortcut: a text without them cannot match)."""

from __future__ import annotations

import re
from typing import Iterator

__all__ = [
    "Gated",
    "gate_fold",
    "TERSE",
    "DETERMINERS",
    "TRAILING_PUNCT",
    "VALUE_STOP",
    "PRONOUN_VALUE",
    "LIST_SPLIT",
    "LEADING_ADVERB",
    "NAME_WORD",
    "NAME_EXPLICIT",
    "NAME_IM",
    "ROLE",
    "ROLE_END",
    "ROLE_STOP",
    "EMPLOYER",
    "LOCATION",
    "ORIGIN",
    "MY_ATTR",
    "PREFERENCE",
    "DISLIKE_VERBS",
    "FAVORITE",
    "I_LEAD",
    "TOOL_USER",
    "TOOL_PROJECT",
    "TOOL_TRIM",
    "DECISION",
    "DECISION_STOP",
    "TOPIC",
    "CONSTRAINT_IMPERATIVE",
    "CONSTRAINT_NAMED",
    "NOTE",
    "URL",
    "HOST",
    "PATH",
    "PORT",
    "DIGIT",
    "NAMED_PORT",
    "VERSION_V",
    "NUMBER",
    "VERSION_THING",
    "UNIT_AFTER",
    "OWNER_VERB",
    "THING_WORD",
    "MOVED",
    "LOCATION_GONE",
    "EMPLOYER_NEW",
    "NEW_PLACE",
    "EMPLOYER_GONE",
    "JOB_GONE",
    "LEFT",
    "SWITCHED",
    "SWITCHED_TO",
    "TOOL_GONE",
    "LIKE_GONE",
    "ROLE_NEW",
    "ROLE_GONE",
    "ATTR_NEW",
    "ATTR_NEW_UNSAID",
    "ENDS_IN",
    "MY_NEW",
    "GO_BY",
    "INSTEAD_OF",
    "PHONE_VALUE",
    "UPDATE_GATE",
]

# The characters other than A-Z and a-z that a case-insensitive pattern (re.IGNORECASE)
# matches to an ASCII letter: "İ", "ı" (i), "ſ" (s) and the Kelvin sign (k).
_GATE_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def gate_fold(text: str) -> str:
    """``text`` as ``Gated`` words are looked for in: lower case, the letters in
    ``_GATE_FOLD`` mapped to the ASCII letters a case-insensitive pattern matches them to."""
    return text.lower() if text.isascii() else text.translate(_GATE_FOLD).lower()


class Gated:
    """A pattern and its gate: words (lower case, ASCII, no spaces) one of which every
    text the pattern matches contains. ``search`` and ``finditer`` look for the words in
    the text's ``gate_fold`` first and scan with the pattern only when one is there."""

    __slots__ = ("rx", "words")

    def __init__(self, rx: re.Pattern[str], *words: str) -> None:
        self.rx, self.words = rx, words

    def may_match(self, folded: str) -> bool:
        for w in self.words:  # a loop, not any(): this runs a few dozen times a clause
            if w in folded:
                return True
        return False

    def search(self, text: str, folded: str) -> re.Match[str] | None:
        for w in self.words:
            if w in folded:
                return self.rx.search(text)
        return None

    def finditer(self, text: str, folded: str) -> Iterator[re.Match[str]]:
        return self.rx.finditer(text) if self.may_match(folded) else iter(())


# The terse notation: ``<mark>[<target>]: <text>``, one fact per line.
TERSE = re.compile(r"^\s*(?:[-*•]\s+)?(?P<mark>[CDV?~✓✔☑✅])\[(?P<target>[^\]\n]*)\]\s*:\s*(?P<body>\S.*?)\s*$")

# The shape of a value: where it ends, what it does not start with, how a list splits.
DETERMINERS = re.compile(r"^(?:the|a|an|our|my|your|their|its|this|that|these|those)\s+", re.I)
TRAILING_PUNCT = " \t.,;:!?)\"'»”"
# A clause ends at these (the value before them is kept).
VALUE_STOP = re.compile(
    r"\s*(?:[.;!?](?:\s|$)|,\s*(?:but|and|which|so|because|since|though|while|where|who|to\s+be\s+honest|"
    r"honestly|tbh|haha|lol|though|really)\b|"
    r"\s(?:because|since|but|so that|which|though|although|while|whereas|when|if|unless|"
    r"these days|right now|at the moment|for now|nowadays|lately|anymore|any more|"
    r"last (?:week|month|year)|this (?:week|month|year)|next (?:week|month|year)|"
    r"yesterday|today|recently|now|too|as\s+well|so\s+much|very\s+much|a\s+lot)\b|\s[(—–]|\s-\s|$)",
    re.I,
)
PRONOUN_VALUE = re.compile(
    r"^(?:it|this|that|these|those|them|him|her|you|your|me|us|one|how|what|when|where|why|"
    r"who|which|whether|is|was|are|were|be|being|doing|the way|the idea|when|if|so|too|their|his|its|"
    r"very much|a lot|lots)\b",
    re.I,
)
LIST_SPLIT = re.compile(r"\s*,\s*(?:and\s+|or\s+|&\s+)?|\s+(?:and|&|or|as well as)\s+", re.I)
LEADING_ADVERB = re.compile(r"^(?:(?:also|really|just|especially|particularly|both|either)\s+)+", re.I)

# Building blocks: the start of a word, the subject "I", adverbs between it and the verb.
_W = r"(?<![\w'])"  # start of a word
_I = _W + "I"
_ADV = (
    r"(?:(?:really|also|absolutely|just|do|still|actually|genuinely|truly|kind of|kinda|totally|"
    r"definitely|mostly|mainly|usually|now|currently|always)\s+)*"
)

# Identity.
NAME_WORD = r"[^\W\d_][\w'\-]*"
# (pattern, whether a lower-case name is accepted): "my name is alice" yes, "call me
# later" no.
NAME_EXPLICIT = [
    (Gated(re.compile(_W + r"my\s+(?:full\s+|first\s+|real\s+)?name(?:\s+is|'s)\s+(?P<v>.+)", re.I), "name"), True),
    (Gated(re.compile(_W + r"call\s+me\s+(?P<v>.+)", re.I), "call"), False),
    (Gated(re.compile(_W + r"(?:mein\s+name\s+ist|ich\s+hei(?:ß|ss)e)\s+(?P<v>.+)", re.I), "mein", "ich"), True),
    (
        Gated(re.compile(_W + r"(?:je\s+m'appelle|mon\s+nom\s+est|mon\s+pr[ée]nom\s+est)\s+(?P<v>.+)", re.I), "appelle", "mon"),
        True,
    ),
    (Gated(re.compile(_W + r"(?:me\s+llamo|mi\s+nombre\s+es)\s+(?P<v>.+)", re.I), "llamo", "nombre"), True),
    (
        Gated(re.compile(_W + r"(?:meu\s+nome\s+[ée]|mi\s+chiamo|il\s+mio\s+nome\s+[èe])\s+(?P<v>.+)", re.I), "nome", "chiamo"),
        True,
    ),
]
NAME_IM = Gated(re.compile(_I + r"(?:'m|\s+am)\s+(?P<v>.+)"), "'m", "am")
ROLE = [
    Gated(re.compile(_I + r"(?:'m|\s+am)\s+(?:now\s+|currently\s+)?(?:a|an)\s+(?P<v>.+)"), "'m", "am"),
    Gated(re.compile(_I + r"\s+(?:currently\s+|now\s+)?work\s+as\s+(?:a|an)?\s*(?P<v>.+)", re.I), "work"),
]
ROLE_END = re.compile(
    r"\s+(?:at|for|in|with|from|who|and|on|by|since|based|living|located|working|currently|"
    r"here|there|now|but|so)\b|[,.;!(]"
)
ROLE_STOP = re.compile(
    r"^(?:bit|little|lot|fan|big fan|huge fan|kind of|sort of|part of|member of|fan of|mix|total|huge|big|"
    r"bit of|lot of|few|couple|good|great|new|happy|little bit)\b",
    re.I,
)
EMPLOYER = [
    Gated(re.compile(_I + r"\s+(?:currently\s+|now\s+|still\s+)?work\s+(?:at|for)\s+(?P<v>.+)"), "work"),
    Gated(
        re.compile(_I + r"(?:'m|\s+am)\s+(?:currently\s+|now\s+)?(?:working|employed)\s+(?:at|for|by)\s+(?P<v>.+)"),
        "working",
        "employed",
    ),
    Gated(re.compile(_I + r"\s+(?:just\s+)?joined\s+(?P<v>[A-Z].+)"), "joined"),
]
LOCATION = [
    Gated(re.compile(_I + r"\s+(?:now\s+|currently\s+|still\s+)?(?:live|reside)\s+in\s+(?P<v>.+)", re.I), "live", "reside"),
    Gated(
        re.compile(_I + r"(?:'m|\s+am)\s+(?:now\s+|currently\s+)?(?:based|living|located)\s+in\s+(?P<v>.+)", re.I),
        "based",
        "living",
        "located",
    ),
    Gated(re.compile(_I + r"(?:'ve|\s+have)\s+been\s+(?:living|based)\s+in\s+(?P<v>.+)", re.I), "living", "based"),
    Gated(
        re.compile(_I + r"(?:'m|\s+am)\s+(?:a|an)\s+[^,.;!?]{1,60}?\s+(?:based|living|located)\s+in\s+(?P<v>.+)", re.I),
        "based",
        "living",
        "located",
    ),
    Gated(
        re.compile(_I + r"(?:\s+have|'ve)?\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+to\s+(?P<v>.+)", re.I),
        "moved",
        "relocated",
    ),
    Gated(re.compile(r"(?<![\w'])ich\s+(?:wohne|lebe)\s+(?:jetzt\s+)?in\s+(?P<v>.+)", re.I), "wohne", "lebe"),
    Gated(
        re.compile(r"(?<![\w'])(?:j'habite|je\s+vis|je\s+r[ée]side)\s+(?:à|a|en|au)\s+(?P<v>.+)", re.I), "habite", "vis", "side"
    ),
    Gated(re.compile(r"(?<![\w'])(?:vivo|resido)\s+en\s+(?P<v>.+)", re.I), "vivo", "resido"),
    Gated(re.compile(r"(?<![\w'])(?:moro|vivo)\s+(?:em|no|na|a|in)\s+(?P<v>.+)", re.I), "moro", "vivo"),
]
ORIGIN = Gated(re.compile(_I + r"(?:'m|\s+am|\s+come)\s+(?:originally\s+)?from\s+(?P<v>.+)", re.I), "from")
MY_ATTR = Gated(
    re.compile(
        r"(?<![\w'])my\s+(?P<attr>e-?mail(?:\s+address)?|phone(?:\s+number)?|time\s*zone|pronouns|"
        r"user\s*name|github(?:\s+(?:handle|username))?|handle|website|birthday)\s+(?:is|are)\s+"
        r"(?!(?:now|changing|changed)\b)(?P<v>\S+)",
        re.I,
    ),
    "mail",
    "phone",
    "zone",
    "pronouns",
    "name",
    "github",
    "handle",
    "website",
    "birthday",
)

# Preferences.
PREFERENCE = Gated(
    re.compile(
        r"(?:^|(?<![\w']))(?:(?P<i>I)(?:\s+|(?=')))?"
        + _ADV
        + r"(?P<verb>love|like|prefer|enjoy|adore|dislike|hate|detest|loathe|can't\s+stand|cannot\s+stand|"
        r"can\s+not\s+stand|don't\s+(?:really\s+)?like|do\s+not\s+(?:really\s+)?like|don't\s+enjoy|"
        r"(?:'m|am)\s+not\s+(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of|(?:'m|am)\s+(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of)"
        r"\s+(?P<v>.+)"
    ),
    "love",
    "like",
    "prefer",
    "enjoy",
    "adore",
    "hate",
    "detest",
    "loathe",
    "stand",
    "fan",
)
DISLIKE_VERBS = re.compile(r"^(?:dislike|hate|detest|loathe|can|cannot|don't|do\s+not|'m\s+not|am\s+not)", re.I)
FAVORITE = Gated(
    re.compile(
        r"(?<![\w'])my\s+(?:all[- ]time\s+)?favou?rite\s+(?P<thing>[\w\- ]{2,30}?)\s+(?:is|are|has\s+to\s+be)\s+(?P<v>.+)",
        re.I,
    ),
    "favorite",
    "favourite",
)
I_LEAD = re.compile(
    r"(?:^|[,;:!\-—–]\s*|\b(?:and|but|so|because|cause|since|honestly|personally|also|really|"
    r"yeah|yes|oh|well|still|now|lol|though|although)\s+)$",
    re.I,
)

# Tools.
TOOL_USER = Gated(
    re.compile(_I + r"(?:'m|\s+am)?\s+" + _ADV + r"(?:use|using|work\s+with|code\s+in|write)\s+(?P<v>.+)"),
    "use",
    "using",
    "work",
    "code",
    "write",
)
TOOL_PROJECT = [
    Gated(
        re.compile(
            _W + r"we(?:'re|\s+are)?\s+" + _ADV + r"(?:use|using|rely\s+on|build\s+(?:on|with)|built\s+on)\s+(?P<v>.+)",
            re.I,
        ),
        "use",
        "using",
        "rely",
        "build",
        "built",
    ),
    Gated(re.compile(_W + r"our\s+(?:tech\s+)?stack\s*(?:is|includes|consists\s+of|:)\s*(?P<v>.+)", re.I), "stack"),
    Gated(
        re.compile(
            _W + r"(?:is|are|was|were|gets?|get|it's|we're|we|be)\s+(?:now\s+)?(?:deployed|hosted)\s+(?:on|to)\s+(?P<v>.+)",
            re.I,
        ),
        "deployed",
        "hosted",
    ),
    Gated(re.compile(_W + r"we\s+(?:deploy|host)\s+(?:\w+\s+)?(?:on|to)\s+(?P<v>.+)", re.I), "deploy", "host"),
    Gated(
        re.compile(
            _W + r"(?:our|the)\s+[\w\-]+(?:\s+[\w\-]+)?\s+(?:runs|is\s+running|is\s+built|is\s+written)"
            r"\s+(?:on|in|with)\s+(?P<v>.+)",
            re.I,
        ),
        "runs",
        "running",
        "built",
        "written",
    ),
]
TOOL_TRIM = re.compile(
    r"\s+(?:for|to|in|on|at|as|with|from|via|because|since|internally|everywhere|daily|"
    r"extensively|heavily|exclusively|mostly|too|as\s+well|a\s+lot|only)\b.*$",
    re.I,
)

# Decisions.
# (pattern, confidence name); group "who" says whose decision it is.
DECISION = [
    (
        re.compile(
            _W + r"(?P<who>we|I)(?:'ve|\s+have)?\s+(?:finally\s+|just\s+|all\s+|now\s+)?(?:decided|agreed)"
            r"\s+(?:to\s+|on\s+|that\s+)?(?P<v>.+)",
            re.I,
        ),
        "decision",
    ),
    (
        re.compile(
            _W + r"(?P<who>we|I)(?:'ve|\s+have)?\s+(?:finally\s+|just\s+)?(?:chose|chosen|opted\s+for|settled\s+on)"
            r"\s+(?P<v>.+)",
            re.I,
        ),
        "decision",
    ),
    (re.compile(_W + r"(?P<who>let)'?s\s+(?:go\s+with|stick\s+with|stick\s+to|settle\s+on)\s+(?P<v>.+)", re.I), "decision_soft"),
    (
        re.compile(_W + r"(?P<who>let)'?s\s+(?P<v>(?:use|pick|choose|switch\s+to|move\s+to|adopt|migrate\s+to)\s+.+)", re.I),
        "decision_soft",
    ),
    (
        re.compile(_W + r"(?P<who>we)(?:'ll|\s+will|'re\s+going|\s+are\s+going)\s+(?:go|going)\s+with\s+(?P<v>.+)", re.I),
        "decision_soft",
    ),
    (re.compile(r"^(?P<who>decision|decided|we\s+decided)\s*:\s*(?P<v>.+)", re.I), "decision"),
]
DECISION_STOP = re.compile(
    r"\s*(?:[.;!?](?:\s|$)|,\s*(?:but|so|because|since|which|who|considering)\b|\s(?:because|since|so that)\b"
    r"|\s[(—–]|\s-\s|$)"
)
TOPIC = re.compile(r"\s+for\s+(?:the\s+|our\s+|a\s+|an\s+|all\s+)?(?P<t>[a-z][a-z\-]*(?:\s+[a-z][a-z\-]*){0,2})$")

# Constraints.
# An imperative rule ("Never force-push", "You must not …"), unless what follows the
# adverb shows chit-chat instead ("Never done it before", "Always happy to help").
CONSTRAINT_IMPERATIVE = re.compile(
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
CONSTRAINT_NAMED = re.compile(
    r"^(?P<subj>(?:the|our|all|every|each)\s+[\w.]+(?:\s+[\w.]+){0,2}|[A-Z][\w.]*(?:\s+[\w.]+){0,2})\s+"
    r"(?P<modal>must|mustn't|must\s+not|should\s+never|should\s+always|shall|shall\s+not|may\s+never)\s+"
    r"(?!still\b|be\s+\w+ing\b|have\b|'ve\b|feel|love|know|think|mean|miss|"
    r"be\s+(?:the|a|an|that|because|so|very|really|pretty|such|quite|thrilled|stoked|excited|proud|happy|"
    r"glad|sad|tired|exhausted|amazing|fun|nice|great|hard|tough|awesome|exciting|cool|lovely|beautiful|"
    r"wonderful|incredible|relieved|scary|rewarding|fulfilling)\b)\S.*",
)

# Notes.
NOTE = re.compile(
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
URL = re.compile(
    r"(?<![\w@])(?:https?|wss?|ftp|sftp|ssh|git|s3|gs|file|postgres(?:ql)?|mysql|mariadb|redis|rediss|"
    r"mongodb(?:\+srv)?|amqps?|kafka|nats|grpc|http\+unix)://[^\s<>\"'`]+",
    re.I,
)
HOST = re.compile(
    r"(?<![\w@./:\-])(?P<h>localhost|(?:\d{1,3}\.){3}\d{1,3}|(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)+(?:"
    + _TLDS
    + r"))(?P<port>:\d{2,5})?(?![\w\-]|\.[a-z0-9])",
    re.I,
)
PATH = re.compile(r"(?<![\w:/.~\-\[])(?P<p>(?:~|\.{1,2})?/(?:[\w.@+\-]+/)+[\w.@+\-]*|~/[\w.@+\-]+|[A-Za-z]:\\[^\s\"'<>|]+)")
PORT = re.compile(r"(?i)\bport\s+(?P<p>\d{2,5})\b")
DIGIT = re.compile(r"\d")
NAMED_PORT = re.compile(
    r"(?i)(?<![\w.\-])(?P<thing>(?:[\w.\-]+\s+){0,2}?[\w.\-]+)(?:'s)?\s+port"
    r"(?:\s+is\s+(?:now\s+)?|\s*[=:]\s*)(?P<p>\d{2,5})\b"
)
VERSION_V = re.compile(r"(?<![\w.])v(?P<ver>\d+(?:\.\d+){1,3}(?:[-+][\w.]+)?)(?![\w.]|\.\d)", re.I)
NUMBER = re.compile(r"(?<=\s)(?P<ver>\d+(?:\.\d+){0,3}(?:[-+][\w.]+)?)(?![\w%]|\.\d)")
VERSION_THING = re.compile(r"[A-Za-z][\w+#]*(?:\.js)?")
UNIT_AFTER = re.compile(
    r"\s*(?:%|percent|x\b|times|hours?|hrs?|h\b|minutes?|mins?|m\b|seconds?|secs?|s\b|ms\b|days?|weeks?|"
    r"months?|years?|gb|mb|kb|tb|k\b|km|miles?|kg|lbs?|dollars?|euros?|usd|eur|points?|stars?|people|users?)",
    re.I,
)
# "<thing> is at|runs on|lives in|listens on port|=|:" right before a value.
OWNER_VERB = re.compile(
    r"(?:\s(?:(?:is|are|was|were)(?:\s+now)?(?:\s+(?:running|hosted|reachable|served|available|located|"
    r"stored|kept|deployed|listening|exposed|written|saved|mounted|installed|cached|uploaded|published))?"
    r"|lives?|runs?|listens?|sits?|moved|points?|resolves?|serves?|is\s+set\s+to|defaults?\s+to|changed\s+to)"
    r"(?:\s+(?:at|on|in|under|to|from|as))?(?:\s+port)?|\s*[:=])\s*$",
    re.I,
)
THING_WORD = re.compile(r"[\w.\-]+")


# Updates: a newer value said as a change ("we're fully moved to Lisbon now", "I switched
# from Python to Go", "the new number ends in 0202"), or a value said to hold no longer
# ("I don't live in Berlin anymore", "I left Google", "I no longer use Vim"). What a
# lazy group must find before it ends ("… anymore", "from X to") is bounded ({1,60}), so a
# long text of repeated openings is read in linear time; each is ``Gated`` by the words its
# every match contains.
_WHO = r"(?P<who>I|[Ww]e)"
_HAVE = r"(?:'ve|'re|'m|\s+have|\s+are|\s+am)?"
_UADV = r"(?:(?:fully|finally|just|recently|now|all|officially|completely|properly|actually|since|already)\s+)*"
_NOT = r"(?:don't|do\s+not|no\s+longer|not)"
# "we're fully moved to Lisbon now", "I moved from Berlin to Lisbon", "we've settled in Porto"
MOVED = Gated(
    re.compile(
        _W + _WHO + _HAVE + r"\s+" + _UADV + r"(?:(?:moved|relocated)\s+(?:back\s+|over\s+|house\s+)?"
        r"(?:from\s+(?P<old>[^,;.!?]{1,60}?)\s+)?(?:to|into)|settled\s+(?:down\s+)?in)\s+(?P<v>.+)"
    ),
    "moved",
    "relocated",
    "settled",
)
# "I don't live in Berlin anymore", "I'm no longer based in Paris", "I used to live in Oslo",
# "we moved away from Leeds"
LOCATION_GONE = Gated(
    re.compile(
        _I + r"(?:\s+" + _NOT + r"\s+(?:live|reside)|(?:'m|\s+am)\s+(?:no\s+longer|not)\s+(?:living|based|located)|"
        r"\s+used\s+to\s+(?:live|be\s+based))\s+in\s+(?P<v>.+)"
        r"|" + _W + r"(?:I|[Ww]e)" + _HAVE + r"\s+" + _UADV + r"moved\s+(?:away\s+from|out\s+of)\s+(?P<w>.+)"
    ),
    "live",
    "reside",
    "living",
    "based",
    "located",
    "moved",
)
# "started at the new company on Monday", "I just started a new job at Stripe"
EMPLOYER_NEW = Gated(
    re.compile(
        r"(?:^|" + _I + r"(?:'ve|\s+have)?\s+)" + _UADV + r"(?:started|began)\s+"
        r"(?:(?:working|work|my\s+new\s+job|a\s+new\s+job|a\s+new\s+role|a\s+job|a\s+role|my\s+new\s+role)\s+)?"
        r"(?:at|with|for)\s+(?P<v>.+)",
        re.I,
    ),
    "started",
    "began",
)
# what "started at …" names when it names no company
NEW_PLACE = re.compile(r"(?i)^(?:the|a|my)\s+new\s+(?:company|job|employer|place|firm|team|startup|gig|office)\b")
# "I no longer work at Google", "I don't work for Acme anymore", "I'm not at Initech anymore",
# "I used to work at IBM", "I quit my job at Globex"
EMPLOYER_GONE = Gated(
    re.compile(
        _I + r"(?:\s+" + _NOT + r"\s+work|(?:'m|\s+am)\s+(?:no\s+longer|not)\s+(?:working|employed)|\s+used\s+to\s+work)"
        r"\s+(?:at|for|by)\s+(?P<v>.+)"
        r"|" + _I + r"(?:'m|\s+am)\s+(?:no\s+longer|not)\s+(?:at|with)\s+(?P<w>[A-Z].{0,60}?)\s+(?:anymore|any\s+more)\b"
        r"|"
        + _I
        + r"(?:'ve|\s+have)?\s+"
        + _UADV
        + r"(?:quit|left|resigned\s+from)\s+my\s+(?:job|position|role)\s+(?:at|with)\s+"
        r"(?P<x>.+)"
    ),
    "work",
    "employed",
    "more",
    "quit",
    "left",
    "resigned",
)
# "I quit my job", "I got laid off", "I lost my job": whatever the employer was
JOB_GONE = Gated(
    re.compile(
        _I + r"(?:'ve|\s+have)?\s+" + _UADV + r"(?:quit|left|lost)\s+my\s+job\b(?!\s+(?:at|with)\b)"
        r"|" + _I + r"(?:'ve|\s+have)?\s+(?:got|been|was|just\s+got)\s+(?:laid\s+off|let\s+go|fired)\b(?!\s+from\b)"
        r"|" + _I + r"(?:'ve|\s+have)?\s+" + _UADV + r"resigned\b(?!\s+(?:from|myself|to)\b)"
    ),
    "job",
    "laid",
    "let",
    "fired",
    "resigned",
)
# "I left Google", "I've left Berlin": an employer or a place, whichever it was
LEFT = Gated(re.compile(_I + r"(?:'ve|\s+have)?\s+" + _UADV + r"(?:left|quit)\s+(?P<v>[A-Z].+)"), "left", "quit")
# "I switched from Python to Go", "we migrated from MySQL to Postgres", "I replaced Vim with Helix"
SWITCHED = Gated(
    re.compile(
        _W + _WHO + _HAVE + r"\s+" + _UADV + r"(?:(?:switched|moved|migrated|changed|gone|went|transitioned)\s+(?:over\s+)?"
        r"from\s+(?P<old>[^,;.!?]{1,60}?)\s+(?:over\s+)?to\s+(?P<v>.+)|replaced\s+(?P<old2>[^,;.!?]{1,60}?)\s+with\s+(?P<v2>.+))"
    ),
    "switched",
    "moved",
    "migrated",
    "changed",
    "gone",
    "went",
    "transitioned",
    "replaced",
)
# "I switched to Go", "we migrated to Postgres from MySQL"
SWITCHED_TO = Gated(
    re.compile(
        _W + _WHO + _HAVE + r"\s+" + _UADV + r"(?:switched|migrated|transitioned)\s+(?:over\s+)?to\s+(?P<v>[^,;.!?]{1,60}?)"
        r"(?:\s+from\s+(?P<old>[^,;.!?]{1,60}?))?(?=[,;.!?]|\s+(?:now|these\s+days|last|this|a\s+while|recently|because|since|"
        r"and|but)\b|$)"
    ),
    "switched",
    "migrated",
    "transitioned",
)
# "I no longer use Vim", "I don't use Java anymore", "I stopped using Emacs", "we dropped Jenkins"
TOOL_GONE = Gated(
    re.compile(
        _W + _WHO + r"(?:\s+" + _NOT + r"\s+(?:use|write|code\s+in|work\s+with)|(?:'m|'re|\s+am|\s+are)\s+(?:no\s+longer|not)\s+"
        r"(?:using|writing|coding\s+in|working\s+with)|\s+used\s+to\s+(?:use|write|code\s+in)|(?:'ve|\s+have)?\s+"
        + _UADV
        + r"(?:stopped\s+(?:using|writing|coding\s+in)|gave\s+up(?:\s+on)?|given\s+up(?:\s+on)?|ditched|dropped|abandoned|"
        r"moved\s+(?:away\s+)?from|migrated\s+(?:away\s+)?from|switched\s+away\s+from))\s+(?P<v>.+)"
    ),
    "not",
    "n't",
    "longer",
    "used",
    "stopped",
    "gave",
    "given",
    "ditched",
    "dropped",
    "abandoned",
    "moved",
    "migrated",
    "switched",
)
# "I don't like Java anymore", "I no longer enjoy running", "I used to love sushi"
LIKE_GONE = Gated(
    re.compile(
        _I + r"(?:\s+(?:don't|do\s+not)\s+(?:really\s+)?(?P<verb>like|love|enjoy|hate|mind)\s+(?P<v>.{1,80}?)\s+"
        r"(?:anymore|any\s+more)\b"
        r"|\s+no\s+longer\s+(?P<verb2>like|love|enjoy|hate|mind)\s+(?P<v2>.+)"
        r"|\s+used\s+to\s+(?P<verb3>like|love|enjoy|hate)\s+(?P<v3>.+)"
        r"|(?:'m|\s+am)\s+(?:no\s+longer|not)\s+(?:into|(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of)\s+(?P<v4>.{1,80}?)\s+"
        r"(?:anymore|any\s+more)\b)"
    ),
    "more",
    "longer",
    "used",
)
# "I got promoted to staff engineer", "I'm no longer a manager"
ROLE_NEW = Gated(
    re.compile(_I + r"(?:'ve|\s+have)?\s+(?:just\s+|finally\s+)?(?:got|been|was)\s+promoted\s+to\s+(?:a\s+|an\s+)?(?P<v>.+)"),
    "promoted",
)
ROLE_GONE = Gated(
    re.compile(
        _I + r"(?:'m|\s+am)\s+(?:no\s+longer|not)\s+(?:a|an)\s+(?P<v>[^,;.!?]{1,60}?)\s+(?:anymore|any\s+more)\b"
        r"|" + _I + r"(?:'m|\s+am)\s+no\s+longer\s+(?:a|an)\s+(?P<w>.+)"
    ),
    "more",
    "longer",
)
_ATTR = (
    r"(?P<attr>phone\s+number|mobile\s+number|cell\s+number|number|phone|mobile|cell|e-?mail(?:\s+address)?|"
    r"address|time\s*zone|user\s*name|github(?:\s+(?:handle|username))?|handle|website|pronouns)"
)
# "my new number is 555 0202", "my email is now ana@new.example", "I changed my number to …"
ATTR_NEW = Gated(
    re.compile(
        _W
        + r"(?:(?:my|the)\s+new\s+"
        + _ATTR
        + r"(?:\s+(?:is|will\s+be|'s)|\s*:)|my\s+"
        + _ATTR.replace("attr", "attr2")
        + r"\s+(?:is\s+now|has\s+changed\s+to|changed\s+to|is\s+changing\s+to)|I(?:'ve|\s+have)?\s+changed\s+my\s+"
        + _ATTR.replace("attr", "attr3")
        + r"\s+to)\s+(?P<v>.+)",
        re.I,
    ),
    "new",
    "now",
    "changed",
    "changing",
)
# "I got a new phone number", "I've changed my email": the old value no longer holds
ATTR_NEW_UNSAID = Gated(
    re.compile(
        _I
        + r"(?:'ve|\s+have)?\s+(?:just\s+)?(?:(?:got|get|have)\s+a\s+new|changed\s+my)\s+"
        + _ATTR
        + r"(?=\s*(?:[,;.!]|$|\s+(?:and|so|now|today|yesterday|last)\b))",
        re.I,
    ),
    "new",
    "changed",
)
# "the new number ends in 0202"
ENDS_IN = Gated(
    re.compile(
        r"(?i)(?<![\w'])(?:my|the)\s+new\s+(?:phone\s+|mobile\s+|cell\s+)?number\s+(?:ends|ending)\s+(?:in|with)\s+(?P<v>\d[\d\s\-]{1,6}\d)\b"
    ),
    "ends",
    "ending",
)
PHONE_VALUE = re.compile(r"^\+?\(?\d[\d\s().\-]{3,}\d")
# "my new job is at Stripe", "my new role is team lead", "our new place is in Porto"
MY_NEW = Gated(
    re.compile(
        r"(?i)(?<![\w'])(?:my|our)\s+new\s+(?:(?P<job>job|company|employer|workplace|firm)\s+is\s+(?:at\s+|with\s+)?"
        r"|(?P<role>role|title|position|job\s+title)\s+is\s+(?:a\s+|an\s+)?"
        r"|(?P<home>place|home|flat|apartment|house)\s+is\s+in\s+)(?P<v>.+)"
    ),
    "new",
)
# "I go by Sam now"
GO_BY = Gated(re.compile(_I + r"\s+(?:now\s+)?go\s+by\s+(?P<v>.+)"), "go")
# "I'm using Linux now instead of Windows", "we write Go instead of Python these days"
INSTEAD_OF = Gated(
    re.compile(
        _W + _WHO + r"(?:'m|'re|\s+am|\s+are)?\s+" + _UADV + r"(?:(?:mostly|mainly|only)\s+)?"
        r"(?:use|using|write|writing|code\s+in|coding\s+in|work\s+with|working\s+with)\s+"
        r"(?P<new>[^,;.!?]{1,60}?)\s+(?:now\s+|these\s+days\s+)?instead\s+of\s+(?P<v>.+)"
    ),
    "instead",
)

# The gate of the update rules together, as one scan of the folded sentence: each rule's
# words at the start of a word (a sentence with none is read by no update rule).
UPDATE_GATE = re.compile(
    r"n't|(?<![a-z])(?:moved|relocated|settled|live|reside|living|based|located|started|began|work|employed|"
    r"any\s*more|quit|left|resigned|job|laid|let|fired|switched|migrated|changed|gone|went|transitioned|replaced|"
    r"not|no\s+longer|used|stopped|gave|given|ditched|dropped|abandoned|promoted|new|now|changing|ends|ending|go\s+by|instead)"
)
