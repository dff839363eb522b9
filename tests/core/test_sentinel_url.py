"""The Sentinel form of MEMSTREAM_REDIS_URL: what it names, what it refuses, and that no
message about it shows a password."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstream.core import mask_url
from memstream.core.sentinel_url import DEFAULT_PORT, is_sentinel_url, parse_sentinel_url
from memstream.core.settings import Settings


def test_hosts_service_db_and_both_sets_of_credentials():
    target = parse_sentinel_url(
        "redis+sentinel://ops:p%40ss@s1:26380,[::1],s3/mymaster/2?sentinel_username=watch&sentinel_password=sp"
    )
    assert target.sentinels == (("s1", 26380), ("::1", DEFAULT_PORT), ("s3", DEFAULT_PORT))
    assert (target.service_name, target.db) == ("mymaster", 2)
    assert (target.username, target.password) == ("ops", "p@ss")
    assert (target.sentinel_username, target.sentinel_password) == ("watch", "sp")


def test_defaults_a_password_alone_and_db_as_an_option():
    assert parse_sentinel_url("redis+sentinel://s1/svc") == parse_sentinel_url("redis+sentinel://s1:26379/svc/")
    target = parse_sentinel_url("REDIS+SENTINEL://secret@s1/svc?db=3")
    assert (target.username, target.password, target.db) == (None, "secret", 3)
    assert is_sentinel_url("redis+sentinel://s1/svc") and not is_sentinel_url("redis://s1:6379/0")


@pytest.mark.parametrize(
    "url, why",
    [
        ("redis+sentinel://s1", "names no service"),
        ("redis+sentinel://s1/", "names no service"),
        ("redis+sentinel:///svc", "names no Sentinel"),
        ("redis+sentinel://s1,,s2/svc", "names no Sentinel"),
        ("redis+sentinel://s1:0/svc", "port is not a number"),
        ("redis+sentinel://s1:http/svc", "port is not a number"),
        ("redis+sentinel://[::1/svc", "not host[:port]"),
        ("redis+sentinel://s1/svc/x", "db that is not"),
        ("redis+sentinel://s1/svc/0/1", "path other than"),
        ("redis+sentinel://s1/svc?sentinel_pasword=x", "unknown option 'sentinel_pasword'"),
        ("redis+sentinel://s1/svc#frag", "fragment"),
        ("redis://s1/svc", "not a redis+sentinel"),
    ],
)
def test_malformed_urls_are_refused_with_the_reason(url, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        parse_sentinel_url(url)
    if url.startswith("redis+sentinel"):
        problems = Settings.load(redis_url=url).problems
        assert len(problems) == 1 and why.split("'")[0] in problems[0]


def test_a_valid_sentinel_url_is_no_problem_and_is_kept():
    url = "redis+sentinel://u:pw@s1:26379,s2:26379/mymaster/0?sentinel_password=sp"
    loaded = Settings.load(redis_url=url)
    assert loaded.problems == () and loaded.redis_url == url


def test_mask_url_hides_both_passwords_and_keeps_the_hosts():
    assert (
        mask_url("redis+sentinel://u:pw@s1:26379,s2/mymaster/0?sentinel_password=sp")
        == "redis+sentinel://u:***@s1:26379,s2/mymaster/0?sentinel_password=***"
    )


# secrets and the rest of the URL from disjoint alphabets: a problem that names a part of
# the rest (an unknown option) cannot contain a secret by chance
_secret = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!$*+-", min_size=8, max_size=20)
_rest = st.text("abcdefghijklmnopqrstuvwxyz=&;#?/_ :@,.", max_size=30)


@given(password=_secret, sentinel_password=_secret, tail=_rest)
def test_no_problem_message_shows_a_password(password, sentinel_password, tail):
    url = f"redis+sentinel://u:{password}@s1/svc?sentinel_password={sentinel_password}&{tail}"
    for problem in Settings.load(redis_url=url).problems:
        assert password not in problem and sentinel_password not in problem
