"""Settings.load(): whatever the environment holds, it never raises, records a problem for
every value it cannot use, and public() shows no credential."""

from __future__ import annotations

import json
import math
from urllib.parse import quote

import pytest
from fuzzing import examples
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from memstream.core.settings import LATE_RERANK_MODES, OPTIONS, OTHER_VARIABLES, Settings, mask_url

ENVS = [env for _, env, _, _ in OPTIONS]
ENV_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
ENV_VALUE = st.one_of(
    ENV_TEXT,
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "-1",
            "0",
            "1e309",
            "1" * 5000,
            "~nosuchuser-ms/x",
            "maybe",
            "",
            "redis://h:port",
            "http://[::1",
            "valkey://h",
            "redis://",
            "unix://",
            "https://q:99999",
        ]
    ),
    st.integers(min_value=-(1 << 70), max_value=1 << 70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


def _plain(text: str, default: object) -> object:
    """``text`` read as the option's type, the plain way (None when it is not one)."""
    try:
        if isinstance(default, bool):
            return {
                "1": True,
                "true": True,
                "yes": True,
                "on": True,
                "0": False,
                "false": False,
                "no": False,
                "off": False,
                "": False,
            }[text.strip().lower()]
        if isinstance(default, int):
            try:
                return int(text)
            except ValueError:  # an integral number in another spelling: 1e3, 5.0
                number = float(text)
                return int(number) if number.is_integer() else None
        if isinstance(default, float):
            return float(text)
    except (KeyError, ValueError):
        return None
    return text


@hsettings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(env=st.dictionaries(st.sampled_from(ENVS), ENV_VALUE, max_size=len(ENVS)))
def test_load_never_raises_and_every_value_it_keeps_is_usable(monkeypatch, env):
    for name in ENVS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    loaded = Settings.load()
    for attr, name, default, _ in OPTIONS:
        value = getattr(loaded, attr)
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            assert math.isfinite(value)
        if name not in env or attr == "home":
            continue
        given_value = _plain(env[name], default)
        if value != given_value or attr.endswith("_url") and "://" not in value and value:
            # not used as given (or a URL without a scheme): a problem says so
            assert any(name in p or attr in p for p in loaded.problems), (name, env[name], loaded.problems)
    assert loaded.shards >= 1 and loaded.tool_timeout >= 0.1 and loaded.max_text_bytes >= 64
    assert loaded.tenant.strip() and loaded.stream_prefix.strip()
    json.dumps(loaded.public())  # JSON-ready


@pytest.mark.parametrize(
    "env, value, problem",
    [
        ("MEMSTREAM_SHARDS", "nan", "MEMSTREAM_SHARDS='nan' is not a valid int"),
        ("MEMSTREAM_SHARDS", "0", "shards must be between 1 and 1024"),
        ("MEMSTREAM_TOOL_TIMEOUT", "nan", "is not a valid float (not finite)"),
        ("MEMSTREAM_SHUTDOWN_TIMEOUT", "inf", "is not a valid float (not finite)"),
        ("MEMSTREAM_SHUTDOWN_TIMEOUT", "-1", "shutdown_timeout must be between"),
        ("MEMSTREAM_MAX_TEXT_BYTES", "-5", "max_text_bytes must be between"),
        ("MEMSTREAM_SHIP_BATCH", "0", "ship_batch must be between"),
        ("MEMSTREAM_AUTOSTART", "maybe", "MEMSTREAM_AUTOSTART='maybe' is not a valid bool"),
        ("MEMSTREAM_TENANT", "   ", "tenant must be 1 to 256 printable characters"),
        ("MEMSTREAM_STREAM_PREFIX", "a\nb", "stream_prefix must be 1 to 256 printable characters"),
        ("MEMSTREAM_SPOOL_FSYNC", "inf", "spool_fsync='inf' is not never|always|SECONDS"),
        ("MEMSTREAM_REDIS_URL", "redis://cache:port", "MEMSTREAM_REDIS_URL='redis://cache:port' is not a URL with a valid"),
        ("MEMSTREAM_REDIS_URL", "http://cache:6379", "has no supported scheme"),
        ("MEMSTREAM_REDIS_URL", "redis://", "names no host"),
        ("MEMSTREAM_REDIS_URL", "redis://cache?socket_timeout=soon", "has an invalid query parameter"),
        ("MEMSTREAM_QDRANT_URL", "qdrant:6333", "MEMSTREAM_QDRANT_URL='qdrant:6333' has no supported scheme"),
        ("MEMSTREAM_HOME", "~nosuchuser-memstream/x", "cannot expand '~'"),
    ],
)
def test_invalid_values_are_recorded_problems(monkeypatch, env, value, problem):
    monkeypatch.setenv(env, value)
    loaded = Settings.load()
    assert any(problem in p for p in loaded.problems), loaded.problems


@pytest.mark.parametrize(
    "url", ["", "redis://cache:6379/0", "rediss://u:p@cache", "unix:///run/valkey.sock", "redis://[::1]:6380"]
)
def test_valid_redis_urls_are_no_problem(monkeypatch, url):
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", url)
    loaded = Settings.load()
    assert loaded.problems == () and loaded.redis_url == url


def test_a_malformed_url_is_kept_not_replaced_by_the_embedded_service(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_REDIS_URL", "redis://cache:port")
    assert Settings.load().redis_url == "redis://cache:port"  # connecting fails clearly, nothing splits the log


PASSWORD = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FF, blacklist_categories=("Cs",)), min_size=6, max_size=20
).map(lambda p: "Pw" + p)


@hsettings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    password=PASSWORD,
    where=st.sampled_from(["userinfo", "user-only", "query", "raw-userinfo"]),
    env=st.sampled_from(["MEMSTREAM_REDIS_URL", "MEMSTREAM_QDRANT_URL"]),
    scheme=st.sampled_from(["redis", "rediss", "http", "https", "unix", "valkey", ""]),
    param=st.sampled_from(["password", "api_key", "token", "apikey", "auth", "secret"]),
    port=st.sampled_from(["", ":6379", ":port", ":99999"]),
)
def test_public_and_problems_never_show_a_planted_password(monkeypatch, password, where, env, scheme, param, port):
    quoted = quote(password, safe="")
    prefix = f"{scheme}://" if scheme else ""
    url = {
        "userinfo": f"{prefix}ops:{quoted}@cache{port}/0",
        "user-only": f"{prefix}{quoted}@cache{port}",
        "query": f"{prefix}cache{port}/?db=0&{param}={quoted}",
        "raw-userinfo": f"{prefix}ops:{password}@cache{port}",  # not escaped: a malformed URL
    }[where]
    monkeypatch.setenv(env, url)
    loaded = Settings.load()
    shown = json.dumps(loaded.public(), ensure_ascii=False) + "\n".join(loaded.problems)
    for secret in {password, quoted}:
        assume(secret not in url.replace(secret, "", 1))  # planted once: nothing else to confuse it with
        assert secret not in shown, (url, shown)


def test_mask_url_keeps_what_helps_find_the_server():
    assert mask_url("redis://ops:pw@cache:6379/0") == "redis://ops:***@cache:6379/0"
    assert mask_url("rediss://token-only@cache") == "rediss://***@cache"
    assert mask_url("https://q:6333/?api_key=k&timeout=5") == "https://q:6333/?api_key=***&timeout=5"
    assert mask_url("redis://cache:6379") == "redis://cache:6379"


@pytest.mark.parametrize(
    "name, closest",
    [
        ("MEMSTREAM_TENENT", "MEMSTREAM_TENANT"),
        ("MEMSTREAM_REDIS_URI", "MEMSTREAM_REDIS_URL"),
        ("MEMSTREAM_EMBED_APIKEY", "MEMSTREAM_EMBED_API_KEY"),
        ("MEMSTREAM_DEBUGG", "MEMSTREAM_DEBUG"),
    ],
)
def test_a_variable_that_is_no_setting_is_a_problem_naming_the_closest_one(monkeypatch, name, closest):
    monkeypatch.setenv(name, "sk-planted-secret")
    problems = Settings.load().problems
    assert problems == (f"{name} is not a setting (did you mean {closest}?); ignored",)


def test_a_variable_far_from_every_setting_is_a_problem_without_a_guess(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_ZZZZZZZZZZZZ", "1")
    assert Settings.load().problems == ("MEMSTREAM_ZZZZZZZZZZZZ is not a setting; ignored",)


def test_the_variables_memstream_reads_beside_its_settings_are_no_problem(monkeypatch):
    for name in OTHER_VARIABLES:
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("NOT_MEMSTREAM_TENANT", "x")
    assert Settings.load().problems == ()


def test_a_file_key_that_is_no_setting_is_a_problem_naming_the_closest_one(tmp_path):
    (tmp_path / "memstream.json").write_text(
        json.dumps({"tenent": "sk-planted-secret", "MEMSTREAM_SHARDS": 2, "colour": "blue", "app": "bench"})
    )
    loaded = Settings.load(hermes_home=tmp_path)
    path = tmp_path / "memstream.json"
    assert loaded.problems == (
        f"{path}: 'tenent' is not a setting (did you mean 'tenant'?); ignored",
        f"{path}: 'MEMSTREAM_SHARDS' is not a setting (did you mean 'shards'?); ignored",
        f"{path}: 'colour' is not a setting; ignored",
    )
    assert loaded.app == "bench" and loaded.tenant == "default" and loaded.shards == 1


def test_the_file_keeps_its_tolerances_a_number_for_a_text_setting_and_a_whole_float(tmp_path):
    (tmp_path / "memstream.json").write_text(json.dumps({"spool_fsync": 2, "shards": 4.0, "autostart": 0}))
    loaded = Settings.load(hermes_home=tmp_path)
    assert loaded.problems == ()
    assert (loaded.spool_fsync, loaded.fsync_interval, loaded.shards, loaded.autostart) == ("2", 2.0, 4, False)


@pytest.mark.parametrize("value", [["a", "list"], {"an": "object"}, None, True])
def test_a_file_value_of_no_usable_type_is_a_problem_and_never_shown_when_secret(tmp_path, value):
    (tmp_path / "memstream.json").write_text(json.dumps({"embed_api_key": value, "tenant": value}))
    loaded = Settings.load(hermes_home=tmp_path)
    assert loaded.embed_api_key == "" and loaded.tenant == "default"
    assert any(p.startswith("MEMSTREAM_EMBED_API_KEY='***' is not a valid str") for p in loaded.problems)
    assert any(p.startswith("MEMSTREAM_TENANT=") for p in loaded.problems), loaded.problems


@hsettings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.dictionaries(
        st.one_of(st.sampled_from([o.attribute for o in OPTIONS]), st.text(max_size=12)),
        st.recursive(
            st.none() | st.booleans() | st.integers(min_value=-(1 << 80), max_value=1 << 80) | st.floats() | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=3),
            max_leaves=4,
        ),
        max_size=8,
    )
)
def test_load_never_raises_whatever_the_file_holds(tmp_path, content):
    (tmp_path / "memstream.json").write_text(json.dumps(content))
    loaded = Settings.load(hermes_home=tmp_path)
    unknown = [key for key in content if key not in {o.attribute for o in OPTIONS}]
    assert len([p for p in loaded.problems if "is not a setting" in p]) == len(unknown)
    for attr, _, default, _ in OPTIONS:
        value = getattr(loaded, attr)
        assert type(value) is type(default) or attr == "home"
        if isinstance(default, float):
            assert math.isfinite(value)
    json.dumps(loaded.public())


@pytest.mark.parametrize(
    "env, value, problem",
    [
        ("MEMSTREAM_EMBED_DIM", "wide", "MEMSTREAM_EMBED_DIM='wide' is not a valid int"),
        ("MEMSTREAM_EMBED_DIM", "-1", "embed_dim must be between 0 and 65536"),
        ("MEMSTREAM_EMBED_THREADS", "-2", "embed_threads must be between 0 and 1024"),
        ("MEMSTREAM_EMBED_URL", "llm.example:8080", "MEMSTREAM_EMBED_URL='llm.example:8080' has no supported scheme"),
        ("MEMSTREAM_STALL_AFTER_S", "soon", "MEMSTREAM_STALL_AFTER_S='soon' is not a valid float"),
        ("MEMSTREAM_STALL_AFTER_S", "0", "stall_after_s must be between 0.1 and 86400.0"),
        ("MEMSTREAM_WORKER_INDEX", "", "worker_index must be 1 to 256 printable characters"),
        ("MEMSTREAM_LATE_RERANK", "maybe", "late_rerank must be one of auto, on, off (got 'maybe'); using 'auto'"),
        ("MEMSTREAM_LATE_RERANK", "ON", "late_rerank must be one of auto, on, off"),
    ],
)
def test_invalid_embedder_and_worker_values_are_recorded_problems(monkeypatch, env, value, problem):
    monkeypatch.setenv(env, value)
    loaded = Settings.load()
    assert any(problem in p for p in loaded.problems), loaded.problems
    attr = env.removeprefix("MEMSTREAM_").lower()
    if attr.endswith("_url"):
        assert getattr(loaded, attr) == value  # kept as given: connecting fails clearly
    else:
        assert getattr(loaded, attr) == getattr(Settings(), attr)  # the default is used


@pytest.mark.parametrize("mode", LATE_RERANK_MODES)
def test_each_late_rerank_mode_loads_without_a_problem(monkeypatch, mode):
    monkeypatch.setenv("MEMSTREAM_LATE_RERANK", mode)
    loaded = Settings.load()
    assert loaded.late_rerank == mode
    assert not [p for p in loaded.problems if "late_rerank" in p]


def test_every_setting_is_read_from_its_variable(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_EMBED_URL", "https://llm.example/v1")
    monkeypatch.setenv("MEMSTREAM_EMBED_MODEL", "m")
    monkeypatch.setenv("MEMSTREAM_EMBED_API_KEY", "sk-x")
    monkeypatch.setenv("MEMSTREAM_EMBED_DIM", "768")
    monkeypatch.setenv("MEMSTREAM_EMBED_THREADS", "3")
    monkeypatch.setenv("MEMSTREAM_STALL_AFTER_S", "0.5")
    monkeypatch.setenv("MEMSTREAM_WORKER_INDEX", "w2")
    loaded = Settings.load()
    assert loaded.problems == ()
    assert (
        loaded.embed_url,
        loaded.embed_model,
        loaded.embed_api_key,
        loaded.embed_dim,
        loaded.embed_threads,
        loaded.stall_after_s,
        loaded.worker_index,
    ) == ("https://llm.example/v1", "m", "sk-x", 768, 3, 0.5, "w2")


def test_public_hides_the_api_key_and_shows_every_other_setting(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_EMBED_API_KEY", "sk-planted-secret")
    monkeypatch.setenv("MEMSTREAM_EMBED_URL", "https://llm.example/v1?api_key=sk-in-url")
    shown = Settings.load().public()
    assert shown["embed_api_key"] == "***" and shown["embed_url"] == "https://llm.example/v1?api_key=***"
    assert shown["prefetch_tokens"] == 400  # a count of tokens, not a token
    assert set(shown) == {o.attribute for o in OPTIONS}
    assert "sk-" not in json.dumps(shown)


def test_an_override_that_is_no_setting_is_a_mistake_in_the_code():
    with pytest.raises(TypeError, match="tenent"):
        Settings.load(tenent="x")


def test_sources_name_where_each_value_came_from_and_never_the_value(tmp_path, monkeypatch):
    (tmp_path / "memstream.json").write_text(json.dumps({"app": "bench", "tenant": "from-file", "shards": 0}))
    monkeypatch.delenv("MEMSTREAM_AUTOSTART")
    monkeypatch.delenv("MEMSTREAM_METRICS_ADDR")  # set for every test by conftest
    monkeypatch.setenv("MEMSTREAM_TENANT", "from-env")
    monkeypatch.setenv("MEMSTREAM_EMBED_API_KEY", "sk-planted-key")
    monkeypatch.setenv("MEMSTREAM_EMBED_DIM", "wide")  # not a number: the default is used
    loaded = Settings.load(hermes_home=tmp_path, home=str(tmp_path / "h"))
    path = str(tmp_path / "memstream.json")
    assert dict(loaded.sources) == {
        "home": "given",
        "app": path,
        "tenant": "MEMSTREAM_TENANT",
        "embed_api_key": "MEMSTREAM_EMBED_API_KEY",
    }  # shards=0: out of bounds
    assert "sk-planted-key" not in repr(loaded.sources) and loaded.tenant == "from-env"
    assert "sources" not in {o.attribute for o in OPTIONS} and "sources" not in loaded.public()


@pytest.mark.parametrize(
    "text, address",
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("[::1]:9464", ("::1", 9464)),
        ("localhost:0", ("localhost", 0)),
        ("10.0.0.5:9100", ("10.0.0.5", 9100)),
        ("", None),
        ("  ", None),
    ],
)
def test_the_metrics_address_is_host_and_port_or_empty_for_none(monkeypatch, text, address):
    monkeypatch.setenv("MEMSTREAM_METRICS_ADDR", text)
    loaded = Settings.load()
    assert loaded.problems == () and loaded.metrics_address == address


@pytest.mark.parametrize(
    "text", [":9464", "9464", "host:70000", "host:-1", "host:９", "::1:9464", "a b:1", "host:port", "http://host:1"]
)
def test_a_malformed_metrics_address_is_a_problem_and_the_default_is_used(monkeypatch, text):
    monkeypatch.setenv("MEMSTREAM_METRICS_ADDR", text)
    loaded = Settings.load()
    assert any(p.startswith("MEMSTREAM_METRICS_ADDR=") and "is not HOST:PORT" in p for p in loaded.problems)
    assert loaded.metrics_address == ("127.0.0.1", 9464)


def test_query_threads_default_to_the_usable_cpus_within_two_and_eight(monkeypatch):
    import memstream.core.settings as settings_module

    for cpus, threads in ((1, 2), (2, 2), (6, 6), (64, 8)):
        monkeypatch.setattr(settings_module, "usable_cpus", lambda cpus=cpus: cpus)
        assert Settings.load(query_threads=0).query_server_threads == threads
    assert Settings.load(query_threads=3).query_server_threads == 3
    monkeypatch.setenv("MEMSTREAM_QUERY_THREADS", "5")
    assert Settings.load().query_server_threads == 5
