"""compose.yaml cannot run here (no Docker engine); what can be checked without one is: every
service's image, command, environment and healthcheck against what memstream reads, and the
files it mounts from deploy/ against what Prometheus and Grafana read (promtool itself when
it is installed). The dashboard's expressions are evaluated by a real Prometheus in
tests/service/test_prometheus.py."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from dashboard_support import dashboard, expressions, panels, scan, variable_queries, variables_used

from memstream.core.settings import ENV_PREFIX, Settings
from memstream.service.metrics import FAMILIES, Family

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "compose.yaml"
PROMTOOL = shutil.which("promtool")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Series Prometheus makes itself, and their labels (None: any, an alert's labels)
PROMETHEUS_OWN: dict[str, frozenset[str] | None] = {"up": frozenset({"instance", "job"}), "ALERTS": None}
LONG_RUNNING = {"redis", "redis-replica", "sentinel1", "sentinel2", "sentinel3", "qdrant", "worker", "prometheus", "grafana"}
SENTINELS = ("sentinel1", "sentinel2", "sentinel3")
SENTINEL_URL = re.compile(r"redis\+sentinel://(?P<hosts>[^/@]+)/(?P<service>[\w.-]+)")


def _parse_sentinel_url(url: str) -> tuple[list[tuple[str, int]], str]:
    """The Sentinels and the service name of a ``redis+sentinel://`` URL, by memstream's own
    parser when it has one (``core.parse_sentinel_url``), else by the documented form."""
    try:
        from memstream.core import parse_sentinel_url  # type: ignore[attr-defined]
    except ImportError:
        parse_sentinel_url = None
    if parse_sentinel_url is not None:
        target = parse_sentinel_url(url)
        return [tuple(s) for s in target.sentinels], target.service_name
    found = SENTINEL_URL.fullmatch(url)
    assert found, url
    hosts = [(h.rpartition(":")[0], int(h.rpartition(":")[2])) for h in found["hosts"].split(",")]
    return hosts, found["service"]


def _sentinel_config(service: dict) -> dict[str, list[list[str]]]:
    """The configuration file a Sentinel service writes at start, made by its own command
    (up to the ``&&`` that runs the server), as directive -> argument lists."""
    script = service["command"][2]
    assert service["command"][:2] == ["sh", "-c"] and " > /tmp/sentinel.conf" in script
    writer, _, rest = script.partition(" > /tmp/sentinel.conf")
    assert rest.strip() == "&& exec valkey-sentinel /tmp/sentinel.conf", rest
    text = subprocess.run(["sh", "-c", writer], capture_output=True, text=True, check=True, timeout=10).stdout
    out: dict[str, list[list[str]]] = {}
    for line in text.splitlines():
        words = line.split()
        if words:
            key = " ".join(words[:2]) if words[0] == "sentinel" else words[0]
            out.setdefault(key, []).append(words[2:] if words[0] == "sentinel" else words[1:])
    return out


def _flags(command: list[str]) -> dict[str, list[str]]:
    """A valkey-server command's options: name -> the words after it."""
    out: dict[str, list[str]] = {}
    name = ""
    for word in command[1:]:
        if word.startswith("--"):
            name = word[2:]
            out[name] = []
        elif name:
            out[name].append(word)
    return out


def _spec() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _services() -> dict[str, dict]:
    return _spec()["services"]


def _mounts(service: dict) -> dict[str, Path]:
    """Container path -> the repository path a bind mount of ``service`` puts there."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            out[target] = (ROOT / source).resolve()
    return out


def _mounted(service: dict, container_path: str) -> Path | None:
    """The repository file or folder at ``container_path`` in ``service`` (None: not mounted)."""
    for target, source in sorted(_mounts(service).items(), key=lambda kv: -len(kv[0])):
        if container_path == target or container_path.startswith(target.rstrip("/") + "/"):
            return source / container_path[len(target) :].lstrip("/")
    return None


def _published(service: dict) -> list[tuple[str, int, int]]:
    """(host address, host port, container port) of each published port; "" is every address."""
    out = []
    for entry in service.get("ports", []):
        parts = str(entry).split(":")
        address = parts[0] if len(parts) == 3 else ""
        out.append((address, int(parts[-2]), int(parts[-1])))
    return out


def _worker_env() -> dict[str, str]:
    return {k: str(v) for k, v in _services()["worker"]["environment"].items()}


def _metrics_port() -> int:
    return int(_worker_env()["MEMSTREAM_METRICS_ADDR"].rpartition(":")[2])


def _family(name: str) -> tuple[Family | None, str]:
    """The family a series name belongs to and the suffix after its name ("" or a histogram's)."""
    for f in FAMILIES:
        if name == f.name:
            return f, ""
        if f.type == "histogram" and name.startswith(f.name) and name[len(f.name) :] in HISTOGRAM_SUFFIXES:
            return f, name[len(f.name) :]
    return None, ""


def test_compose_describes_redis_with_aof_qdrant_and_workers_wired_to_both():
    spec = _spec()
    services = spec["services"]
    assert set(services) >= {"redis", "qdrant", "worker"}
    redis_cmd = services["redis"]["command"]
    assert redis_cmd[redis_cmd.index("--appendonly") + 1] == "yes"
    worker = services["worker"]
    env = worker["environment"]
    assert env["MEMSTREAM_REDIS_URL"].startswith("redis+sentinel://")
    assert env["MEMSTREAM_QDRANT_URL"].startswith("http://qdrant:")
    assert set(worker["depends_on"]) == {"redis", "redis-replica", *SENTINELS, "qdrant"}
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which the repository lacks"
            else:
                assert source in spec.get("volumes", {}), (name, volume)


def test_the_workers_reach_the_primary_through_the_three_sentinels_that_watch_it_and_its_replica():
    services = _services()
    sentinels, name = _parse_sentinel_url(_worker_env()["MEMSTREAM_REDIS_URL"])
    assert sorted(host for host, _ in sentinels) == sorted(SENTINELS)
    for host, port in sentinels:
        config = _sentinel_config(services[host])
        assert config["port"] == [[str(port)]], host  # the port the URL names
        assert config["sentinel resolve-hostnames"] == [["yes"]]  # it monitors by service name
        (monitored,) = config["sentinel monitor"]
        assert monitored[0] == name, (host, monitored)  # the service name the URL asks for
        primary, primary_port, quorum = monitored[1], int(monitored[2]), int(monitored[3])
        assert primary == "redis" and primary_port == 6379 and quorum == len(sentinels) // 2 + 1
        assert {s[0] for s in config["sentinel down-after-milliseconds"]} == {name}
        assert services[host]["depends_on"] == {"redis": {"condition": "service_healthy"}}
        assert services[host]["image"].startswith("valkey/valkey:")
    primary = _flags(services["redis"]["command"])
    replica = _flags(services["redis-replica"]["command"])
    assert replica["replicaof"] == ["redis", "6379"]
    for flags, host in ((primary, "redis"), (replica, "redis-replica")):
        assert flags["appendonly"] == ["yes"] and flags["replica-announce-ip"] == [host]
    assert services["redis"]["image"] == services["redis-replica"]["image"]  # one version replicates


def test_every_dependency_waits_for_a_healthcheck_the_service_has():
    services = _services()
    for name, service in services.items():
        for needed, how in service.get("depends_on", {}).items():
            assert needed in services, (name, needed)
            assert how == {"condition": "service_healthy"}, (name, needed, how)
            assert services[needed].get("healthcheck"), (name, needed)


def test_every_image_is_pinned_to_a_release():
    for name, service in _services().items():
        image, _, tag = service["image"].rpartition(":")
        assert image and "/" not in tag, f"{name}: {service['image']} names no tag"
        assert tag != "latest" and re.fullmatch(r"v?\d+(\.\d+)+(-[\w.]+)?", tag), f"{name}: {service['image']}"


def test_the_worker_runs_the_command_the_docs_document():
    from memstream.cli.commands import build_parser, cmd_worker

    commands = (ROOT / "docs" / "commands.md").read_text()
    documented = re.search(r"^## `(memstream worker[^`]*)`$", commands, re.MULTILINE)
    assert documented, "docs/commands.md has no `memstream worker` section"
    usage = documented.group(1)
    script = _services()["worker"]["command"]
    assert script[:2] == ["sh", "-c"]
    ran = re.search(r"(?:^|&& )exec (memstream [^;&|]*)$", script[2])
    assert ran, f"the worker's command does not end by exec'ing memstream: {script[2]}"
    argv = shlex.split(ran.group(1))
    assert argv[:2] == ["memstream", "worker"] and usage.split()[:2] == argv[:2]
    options = set(re.findall(r"--[\w-]+", usage))
    assert {a for a in argv[2:] if a.startswith("--")} <= options, (argv, usage)
    assert build_parser().parse_args(argv[1:]).func is cmd_worker


def test_the_workers_environment_holds_real_settings_that_pass_their_validation(monkeypatch, tmp_path):
    import os

    from memstream.ops import check_worker

    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "none"))
    env = _worker_env()
    assert all(name.startswith(ENV_PREFIX) for name in env)
    try:
        from memstream.core import parse_sentinel_url  # noqa: F401  # type: ignore[attr-defined]
    except ImportError:  # no Sentinel URLs yet: the rest is checked with the primary's URL
        assert SENTINEL_URL.fullmatch(env["MEMSTREAM_REDIS_URL"])
        env["MEMSTREAM_REDIS_URL"] = "redis://redis:6379/0"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings.load()
    assert settings.problems == (), settings.problems
    assert {source for _, source in settings.sources} == set(env), "a variable that no setting reads"
    embedded = "--embedded-store" in " ".join(_services()["worker"]["command"])
    check_worker(settings, embedded)  # raises unless a worker may run with these settings
    assert settings.metrics_address == ("0.0.0.0", _metrics_port())


def test_workers_serve_metrics_on_the_compose_network_and_no_metrics_port_is_published():
    services = _services()
    assert _worker_env()["MEMSTREAM_METRICS_ADDR"].startswith("0.0.0.0:")
    assert not services["worker"].get("ports") and not services["worker"].get("network_mode")
    for name, service in services.items():
        assert all(container != _metrics_port() for _, _, container in _published(service)), name
    # its healthcheck asks the metrics it serves
    assert f"127.0.0.1:{_metrics_port()}/metrics" in " ".join(services["worker"]["healthcheck"]["test"])


def test_prometheus_and_grafana_are_published_on_the_loopback_only():
    for name in ("prometheus", "grafana"):
        published = _published(_services()[name])
        assert published and all(address == "127.0.0.1" for address, _, _ in published), (name, published)


def test_every_long_running_service_has_a_healthcheck():
    for name, service in _services().items():
        assert name in LONG_RUNNING, f"{name}: a service this test does not know"
        check = service.get("healthcheck")
        assert check and check["test"][0] in ("CMD", "CMD-SHELL") and len(check["test"]) > 1, name
    assert _services()["worker"]["depends_on"]["qdrant"]["condition"] == "service_healthy"


def test_compose_reads_only_the_documented_variables_of_the_operators_environment():
    text = COMPOSE.read_text()
    unescaped = re.sub(r"\$\$", "", text)  # $$ is a literal $ for compose
    read = set(re.findall(r"\$\{?(\w+)", unescaped))
    assert read == {"GRAFANA_ADMIN_PASSWORD"}, read
    fleets = (ROOT / "docs" / "fleets.md").read_text()  # the multi-host deployment
    assert all(f"`{name}`" in fleets for name in read)


def test_prometheus_as_mounted_scrapes_every_worker_on_its_metrics_port_and_loads_the_rules():
    prometheus = _services()["prometheus"]
    flags = dict(arg.split("=", 1) for arg in prometheus["command"] if "=" in arg)
    config_path = _mounted(prometheus, flags["--config.file"])
    assert config_path and config_path.is_file(), flags["--config.file"]
    config = yaml.safe_load(config_path.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    sd = jobs["memstream"]["dns_sd_configs"]
    assert [(c["names"], c["type"], c["port"]) for c in sd] == [(["worker"], "A", _metrics_port())]
    container_dir = flags["--config.file"].rpartition("/")[0]
    rules = [_mounted(prometheus, f"{container_dir}/{f}") for f in config["rule_files"]]
    assert rules == [ROOT / "deploy" / "prometheus" / "rules.yml"]
    assert _mounted(prometheus, flags["--storage.tsdb.path"]) is None  # a volume, not the repository


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is absent: `apt-get install prometheus` (.ci/run does)")
def test_promtool_accepts_the_configuration_as_compose_mounts_it(tmp_path):
    prometheus = _services()["prometheus"]
    for target, source in _mounts(prometheus).items():
        copy = tmp_path / target.lstrip("/")
        copy.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, copy)
    flags = dict(arg.split("=", 1) for arg in prometheus["command"] if "=" in arg)
    checked = subprocess.run(
        [PROMTOOL, "check", "config", str(tmp_path / flags["--config.file"].lstrip("/"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 rule files found" in checked.stdout


def test_grafana_is_provisioned_with_the_prometheus_service_and_the_dashboard():
    services = _services()
    grafana = services["grafana"]
    provisioning = _mounted(grafana, "/etc/grafana/provisioning")
    assert provisioning and provisioning.is_dir()
    sources = [
        d for f in sorted((provisioning / "datasources").glob("*.yml")) for d in yaml.safe_load(f.read_text())["datasources"]
    ]
    assert [s["type"] for s in sources] == ["prometheus"]
    url = urlsplit(sources[0]["url"])
    assert url.hostname == "prometheus" and "prometheus" in services
    assert url.port == 9090 and (url.port in {c for _, _, c in _published(services["prometheus"])})
    providers = [
        p for f in sorted((provisioning / "dashboards").glob("*.yml")) for p in yaml.safe_load(f.read_text())["providers"]
    ]
    assert len(providers) == 1 and providers[0]["type"] == "file"
    folder = _mounted(grafana, providers[0]["options"]["path"])
    assert folder and (folder / "memstream.json").is_file()
    home = _mounted(grafana, grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert home == folder / "memstream.json"
    # every panel and variable reads the provisioned data source
    board = dashboard()
    uid = sources[0]["uid"]
    for panel in panels(board):
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == uid, panel["title"]
            assert all(t["datasource"]["uid"] == uid for t in panel["targets"]), panel["title"]
    assert all(v["datasource"]["uid"] == uid for v in board["templating"]["list"] if v["type"] == "query")


def _labels(name: str, where: str) -> set[str] | None:
    """The labels a series called ``name`` may carry (None: any)."""
    family, suffix = _family(name)
    if family is not None:
        return set(family.labels) | {"instance", "job"} | ({"le"} if suffix == "_bucket" else set())
    if name in PROMETHEUS_OWN:
        own = PROMETHEUS_OWN[name]
        return None if own is None else set(own)
    raise AssertionError(f"{where}: {name} is no family of memstream.service.metrics.FAMILIES")


def test_every_metric_the_dashboard_queries_is_a_family_and_every_label_one_of_its_labels():
    board = dashboard()
    defined = {v["name"] for v in board["templating"]["list"]}
    jobs = {
        j["job_name"]
        for j in yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus-compose.yml").read_text())["scrape_configs"]
    }
    for where, expr in expressions(board):
        assert variables_used(expr) <= defined, (where, expr)
        assert set(re.findall(r'job="([^"]*)"', expr)) <= jobs, (where, expr)
        uses = scan(expr)
        assert uses.metrics, (where, expr)
        allowed: set[str] | None = set()
        for name, matchers in uses.selectors:
            labels = _labels(name, where)
            if labels is None:
                allowed = None
                continue
            assert matchers <= labels, (where, name, matchers - labels)
            if allowed is not None:
                allowed |= labels
        if allowed is not None:
            assert uses.grouping <= allowed, (where, uses.grouping - allowed)
    for name, selector, label in variable_queries(board):
        labels = _labels(scan(selector).selectors[0][0], f"variable {name}")
        assert labels is not None and label in labels, name
    # the dashboard shows the figures operators watch (README, Metrics)
    shown = {_family(name)[0] for _, expr in expressions(board) for name in scan(expr).metrics} - {None}
    assert {f.name for f in shown if f} >= {
        "memstream_events_appended_total",
        "memstream_projection_applied_total",
        "memstream_projection_lag_entries",
        "memstream_projection_lag_seconds",
        "memstream_projection_freshness_seconds",
        "memstream_projection_dead_letters",
        "memstream_projection_pending_entries",
        "memstream_projection_consumers",
        "memstream_replay_applied_entries",
        "memstream_replay_log_entries",
        "memstream_query_seconds",
        "memstream_query_queue_length",
        "memstream_queries_total",
        "memstream_redis_up",
    }


def test_the_promql_scanner_finds_the_metrics_and_labels_an_expression_names():
    uses = scan(
        'histogram_quantile(0.95, sum by (group, le) (rate(a_bucket{group=~"$g", x="by (y)"}[$__rate_interval])))'
        " / on (group) group_left max without (z) (b) > bool 1 and c offset 5m"
    )
    assert uses.selectors == [("a_bucket", frozenset({"group", "x"})), ("b", frozenset()), ("c", frozenset())]
    assert uses.grouping == {"group", "le", "z"}
