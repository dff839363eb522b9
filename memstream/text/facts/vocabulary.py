"""Word lists the fact rules consult: words that are not names, demonyms and religions,
the keys of "my <attribute> is", names of technologies, words that are not the thing a
version or a value belongs to, the kinds of the terse notation."""

from __future__ import annotations

__all__ = [
    "TERSE_KIND",
    "NAME_STOP",
    "DEMONYMS",
    "RELIGIONS",
    "ATTR_KEY",
    "CONSTRAINT_BAD_SUBJECT",
    "KNOWN_TECH",
    "VERSION_STOP",
    "THING_STOP",
    "THING_GENERIC_TAIL",
]

TERSE_KIND = {
    "C": "constraint",
    "D": "decision",
    "V": "value",
    "?": "question",
    "~": "tentative",
    "✓": "done",
    "✔": "done",
    "☑": "done",
    "✅": "done",
}
NAME_STOP = frozenset(
    """
not so sure going happy sorry fine good ok okay just also still here back done ready a an
the in at on from with using working trying looking afraid glad new very really gonna
about all always never thinking planning curious interested excited tired busy confused
lost stuck out over into doing having getting feeling currently now only pretty quite
totally kind sort literally basically actually probably definitely almost already
""".split()
)
DEMONYMS = frozenset(
    """
american british english scottish welsh irish canadian australian german french spanish
italian portuguese brazilian mexican argentinian dutch belgian swiss austrian swedish
norwegian danish finnish polish czech russian ukrainian greek turkish indian pakistani
chinese japanese korean vietnamese thai filipino indonesian nigerian kenyan egyptian
israeli iranian
""".split()
)
RELIGIONS = frozenset("christian catholic jewish muslim buddhist hindu atheist agnostic".split())
ATTR_KEY = {
    "email": "email",
    "e-mail": "email",
    "phone": "phone",
    "timezone": "timezone",
    "pronouns": "pronouns",
    "username": "username",
    "github": "username",
    "handle": "username",
    "website": "website",
    "birthday": "birthday",
}
CONSTRAINT_BAD_SUBJECT = frozenset("it this that there i he she they which what who you we your his her their".split())
KNOWN_TECH = frozenset(
    """
python node nodejs node.js java go golang rust ruby php perl scala kotlin swift dotnet .net
postgres postgresql mysql mariadb sqlite redis valkey mongodb elasticsearch opensearch kafka
rabbitmq qdrant ubuntu debian fedora centos rhel alpine macos windows ios android kubernetes
k8s docker terraform ansible helm react vue angular svelte nextjs next.js django flask fastapi
rails spring laravel express typescript ts javascript js gcc clang llvm cuda pytorch torch
tensorflow numpy pandas jdk jre openssl nginx apache envoy istio hermes memstream msgspec
pydantic celery rq
""".split()
)
VERSION_STOP = frozenset(
    """
at in on about only is are was were be to of for and or the a an by from with after before
took takes take costs cost paid pay spent got get version v around approx approximately
over under than up down step phase page chapter section line item number no part day
week month year room level grade top rank round episode season
""".split()
)
THING_STOP = frozenset(
    """
the a an our my your their its this that these those and but so then now check also whether
if since because i we you it he she they there here please see just still which what who
when where why how is are was were be been to of for in on at by with from as
""".split()
)
THING_GENERIC_TAIL = frozenset("url uri host hostname address endpoint port".split())
