"""A forget request said in conversation: ``forget_request(text)`` finds "Please forget my
home address" or "delete what I told you about my health" and says what is to be
forgotten ("my home address", "my health"); None for anything else.

Conservative by design: a false positive erases what the user wanted kept, a miss leaves
the agent's ``memstream_forget`` tool as the way. A request is recognised only when

- the sentence asks (it opens with the verb, "please …", "can/could/would you …", "I want
  you to …", "I'd like you to …", "you should …"), and
- the verb is ``forget`` (or "stop remembering", "don't remember", "don't keep/store") with
  a personal object ("my …", "what I told you …", "everything about me"), or a verb of
  deletion (delete, erase, remove, wipe, purge, clear) whose object names what the agent
  was told or keeps ("what I told you about …", "everything you know about …", "any
  information/details/notes about …", "… from your memory").

Not requests: "don't forget my keys", "I forgot my password", "forget it", "forget my
last message" (disregard), "delete my account" (a service, not memory), a question about
forgetting ("do you ever forget things?"). Pure, linear, never raises on a ``str``.
"""

from __future__ import annotations

import re

import msgspec

from memstream.text.facts.segmentation import APOSTROPHES, split_sentences

__all__ = ["ForgetRequest", "forget_request"]


class ForgetRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What the user asked to be forgotten: ``what`` as they said it ("what I told you about
    my health"), ``topic`` what it is about ("my health": the words to match items by),
    ``sentence`` the request."""

    what: str
    topic: str
    sentence: str


# how a request opens: the verb first, or asked for
_ASK = (
    r"^(?:(?:ok(?:ay)?|also|and|so|hey|now|actually|one\s+more\s+thing|by\s+the\s+way|btw)[,!]?\s+)*"
    r"(?P<ask>(?:please[,]?\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|I\s+(?:want|need)\s+you\s+to\s+|"
    r"I'd\s+like\s+you\s+to\s+|I\s+would\s+like\s+you\s+to\s+|you\s+should\s+|you\s+need\s+to\s+)?)"
)
# forget with a personal object
_FORGET = re.compile(
    _ASK + r"(?P<verb>forget|stop\s+remembering|(?:don't|do\s+not)\s+(?:remember|keep|store|save)|"
    r"un-?remember)\s+(?:about\s+)?"
    r"(?P<what>(?:my|everything\s+(?:about|regarding)|anything\s+(?:about|regarding)|all\s+(?:about|of)|"
    r"what\s+I\s+(?:told|said\s+to|shared\s+with|mentioned\s+to)\s+you|that\s+I\s+(?:told|mentioned)|"
    r"the\s+(?:thing|things|stuff)\s+(?:I\s+(?:told|said|mentioned|shared))|(?:the|any|all)\s+(?:info|information|"
    r"details|data|memories|notes|facts)\s+(?:about|on|regarding|of))\b[^.!?;]{0,120})",
    re.I,
)
# a verb of deletion, with an object that names what the agent was told or keeps
_DELETE = re.compile(
    _ASK + r"(?:delete|erase|remove|wipe|purge|clear|scrub|drop)\s+"
    r"(?P<what>(?:what\s+I\s+(?:told|said\s+to|shared\s+with|mentioned\s+to)\s+you|"
    r"(?:everything|anything|all)\s+(?:that\s+)?(?:you\s+(?:know|have|remember|stored|saved|kept)|I\s+(?:told|said|shared))|"
    r"(?:the|any|all|your)\s+(?:info|information|details|data|memories|memory|notes|facts|records)\s+"
    r"(?:you\s+(?:have|keep|kept|stored|saved)\s+)?(?:about|on|regarding|of)|"
    r"my\s+[^.!?;]{1,80}?\s+from\s+(?:your\s+)?(?:memory|memories|notes))\b[^.!?;]{0,120})",
    re.I,
)
# conversational objects: "forget my last message" means disregard it, not erase it
_NOT_MEMORY = re.compile(
    r"(?i)^my\s+(?:last|previous|earlier|prior|first|other|above|latest|original)\s+"
    r"(?:message|question|comment|request|reply|answer|point|prompt|sentence|text|typo|instruction|instructions|mistake)s?\b"
    r"|^my\s+(?:typo|mistake|question|message|comment)s?\b"
)
_END = re.compile(r"(?i)\s*(?:,\s*(?:please|thanks|thank\s+you|ok|okay)\b|\s+(?:please|thanks|thank\s+you)\b|[,;:]|$)")


def forget_request(text: str) -> ForgetRequest | None:
    """The first forget request in ``text`` (see the module's rules), or None. Pure,
    deterministic, never raises on a str."""
    if not text or not isinstance(text, str):
        return None
    if "forget" not in text.lower() and not _MAY_DELETE.search(text) and "remember" not in text.lower():
        return None
    if not text.isascii():
        text = text.translate(APOSTROPHES)
    for sentence in split_sentences(text):
        body = sentence.strip()
        m = _FORGET.match(body) or _DELETE.match(body)
        if m is None:
            continue
        what = m.group("what")
        end = _END.search(what)
        what = " ".join(what[: end.start()].split()) if end else " ".join(what.split())
        what = re.sub(r"(?i)^(?:about|regarding)\s+", "", what)
        if not what or _NOT_MEMORY.match(what):
            continue
        bare_forget = m.re is _FORGET and not m.group("ask") and m.group("verb").lower() == "forget"
        if bare_forget and re.match(r"(?i)my\b", what):
            continue  # "Forget my coffee order, I'll get tea": never mind, unless asked or told
        topic = _topic(what)
        if not topic:
            continue
        if sentence.rstrip().endswith("?") and not re.match(r"(?i)^(?:please\s+)?(?:can|could|would|will)\s+you\b", body):
            continue  # a question about forgetting, not a request
        return ForgetRequest(what=what, topic=topic, sentence=sentence)
    return None


_CUE = re.compile(
    r"(?i)^(?:what\s+I\s+(?:told|said\s+to|shared\s+with|mentioned\s+to)\s+you|that\s+I\s+(?:told\s+you|mentioned)|"
    r"the\s+(?:thing|things|stuff)\s+I\s+(?:told\s+you|said|mentioned|shared)|"
    r"(?:everything|anything|all)\s+(?:that\s+)?(?:you\s+(?:know|have|remember|stored|saved|kept)|I\s+(?:told\s+you|said|shared))|"
    r"(?:everything|anything|all|the|any|your)(?:\s+(?:information|info|details|data|memories|memory|notes|facts|records)\b)?"
    r"(?:\s+you\s+(?:have|keep|kept|stored|saved))?)"
    r"\s*(?:about|on|regarding|of)?\s*"
)
_FROM_MEMORY = re.compile(r"(?i)\s+from\s+(?:your\s+)?(?:memory|memories|notes)$")


def _topic(what: str) -> str:
    """What a request is about: ``what`` without "what I told you about", "any information
    on", "… from your memory"."""
    topic = _FROM_MEMORY.sub("", _CUE.sub("", what, count=1)).strip()
    return "me" if not topic and re.search(r"(?i)\babout\s+me\b", what) else topic


_MAY_DELETE = re.compile(r"(?i)\b(?:delete|erase|remove|wipe|purge|clear|scrub|drop)\b")
