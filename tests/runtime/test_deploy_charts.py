"""The Helm chart and the Grafana dashboard under deploy/: what can be checked without a cluster.

With `helm` on the PATH the chart is rendered (and linted) and every document must be a Kubernetes
object. Without it (Debian has no helm package), each template is reduced to its YAML skeleton: lines
holding only a template action are dropped and inline actions become a placeholder scalar. That
skeleton must parse, every document must name its kind and apiVersion, every `.Values` path a template
uses must exist in values.yaml, and every `include` must name a template of _helpers.tpl.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from relay.admin.metrics import HELP
from relay.cli import parser
from relay.config import ConfigError, load_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CHART = DEPLOY / "helm" / "relay"
TEMPLATES = CHART / "templates"
DASHBOARD = DEPLOY / "grafana" / "relay-dashboard.json"
RULES = DEPLOY / "prometheus" / "relay-rules.yaml"
HELM = shutil.which("helm")
PROMTOOL = shutil.which("promtool")

ACTION = re.compile(r"\{\{(?:(?!\}\}).)*\}\}")  # one {{ ... }}, never running past its own }}
ACTION_ONLY_LINE = re.compile(r"^\s*(\{\{(?:(?!\}\}).)*\}\}\s*)+$")
PLACEHOLDER = "TEMPLATED"
EXPECTED_KINDS = {
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("networking.k8s.io/v1", "Ingress"),
}


def values() -> dict[str, Any]:
    data = yaml.safe_load((CHART / "values.yaml").read_text())
    assert isinstance(data, dict)
    return data


def template_files() -> list[Path]:
    return sorted(p for p in TEMPLATES.glob("*.yaml"))


def helper_templates() -> dict[str, str]:
    """The bodies of the `define`s of _helpers.tpl, by name."""
    text = (TEMPLATES / "_helpers.tpl").read_text()
    found: dict[str, str] = {}
    name, depth, start = None, 0, 0
    for action in ACTION.finditer(text):
        words = action.group(0).strip("{}-/* ").split()
        if not words:
            continue
        if words[0] == "define" and depth == 0:
            name, depth, start = words[1].strip('"'), 1, action.end()
        elif words[0] in ("if", "with", "range", "define"):
            depth += 1
        elif words[0] == "end" and depth:
            depth -= 1
            if depth == 0 and name is not None:
                found[name] = text[start : action.start()]
    return found


INCLUDE_LINE = re.compile(r'^(\s*)\{\{-?\s*include\s+"([^"]+)"\s+\.\s*(?:\|\s*n?indent\s+(\d+)\s*)?-?\}\}\s*$')


def skeleton(text: str, helpers: dict[str, str] | None = None) -> str:
    """The template's YAML with the template language taken out, conservatively: an action alone on its
    line is dropped (both branches of an `if` stay), except `include` of a helper, which is expanded
    (skeleton of its body, at its indentation); an action within a line becomes a placeholder scalar."""
    helpers = helper_templates() if helpers is None else helpers
    lines = []
    for line in text.splitlines():
        include = INCLUDE_LINE.match(line)
        if include and include.group(2) in helpers:
            indent = " " * int(include.group(3)) if include.group(3) else include.group(1)
            body = skeleton(helpers[include.group(2)], helpers)
            lines.extend(indent + part for part in body.splitlines() if part.strip())
            continue
        if ACTION_ONLY_LINE.match(line):
            continue
        lines.append(ACTION.sub(PLACEHOLDER, line))
    return "\n".join(lines) + "\n"


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def rendered_docs() -> list[dict[str, Any]]:
    """Every object of the chart: rendered by helm when there is one, else the templates' skeletons."""
    if HELM:
        out = subprocess.run(
            [HELM, "template", "relay", str(CHART), *helm_sets()], check=True, capture_output=True, text=True
        ).stdout
        return documents(out)
    return [d for path in template_files() for d in documents(skeleton(path.read_text()))]


def helm_sets() -> list[str]:
    return [
        "--set",
        "redis.url=redis://:pw@redis:6379/0",
        "--set",
        "secrets.RELAY_WEBHOOK_TOKEN=w",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "ingress.public.enabled=true",
        "--set",
        "ingress.internal.enabled=true",
        "--set",
        "metrics.prometheusRule.enabled=true",
        "--set",
        "metrics.grafanaDashboard.enabled=true",
        "--set",
        "secrets.RELAY_PREFERENCES__SECRET=" + "p" * 32,
    ]


def by_name(docs: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind and str(d["metadata"]["name"]).endswith(suffix)]
    return found


# -- Helm chart ----------------------------------------------------------------------------------


def test_chart_metadata_and_values_parse() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "relay" and chart["type"] == "application"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    v = values()
    assert {"image", "redis", "secrets", "config", "api", "worker", "service"} <= set(v)


def test_every_template_renders_to_kubernetes_objects() -> None:
    docs = rendered_docs()
    assert docs
    for doc in docs:
        assert isinstance(doc.get("apiVersion"), str) and isinstance(doc.get("kind"), str), doc
        assert doc["metadata"]["name"]
    kinds = {(d["apiVersion"], d["kind"]) for d in docs}
    assert kinds == EXPECTED_KINDS
    assert sum(d["kind"] == "Deployment" for d in docs) == 2


@pytest.mark.skipif(HELM is None, reason="helm is not installed (Debian has no package); the skeleton checks run")
def test_helm_lint_and_redis_is_required() -> None:
    assert HELM is not None
    subprocess.run([HELM, "lint", str(CHART), *helm_sets()], check=True, capture_output=True)
    failed = subprocess.run([HELM, "template", "relay", str(CHART)], capture_output=True, text=True)
    assert failed.returncode != 0 and "redis.url" in failed.stderr


def test_skeleton_of_each_template_parses_on_its_own() -> None:
    # Run even with helm: a template whose YAML only works by accident of rendering is fragile.
    for path in template_files():
        docs = documents(skeleton(path.read_text()))
        assert docs, path.name
        for doc in docs:
            assert {"apiVersion", "kind", "metadata"} <= set(doc), path.name


def test_api_and_worker_run_relay_commands_with_probes_and_config() -> None:
    docs = rendered_docs()
    known = set(parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    api = by_name(docs, "Deployment", "-api")["spec"]["template"]["spec"]
    worker = by_name(docs, "Deployment", "-worker")["spec"]["template"]["spec"]
    [api_c], [worker_c] = api["containers"], worker["containers"]
    assert api_c["command"] == ["relay", "api"] and worker_c["command"] == ["relay", "worker"]
    assert {api_c["command"][1], worker_c["command"][1]} <= known
    assert api_c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert api_c["startupProbe"]["httpGet"]["path"] == "/healthz"
    readiness = api_c["readinessProbe"]["httpGet"]["path"]
    assert readiness == ("/readyz" if HELM else PLACEHOLDER)
    assert values()["api"]["readinessPath"] == "/readyz"
    for spec, container in ((api, api_c), (worker, worker_c)):
        env = {e["name"] for e in container["env"]}
        assert {"RELAY_CONFIG", "RELAY_DATA_DIR"} <= env
        assert "envFrom" not in container  # secrets come as files, never in the environment
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/etc/relay", "/run/secrets/relay", "/tmp", "/data"} <= mounts
        assert spec["automountServiceAccountToken"] is False
    assert {"RELAY_SERVER__HOST", "RELAY_SERVER__PORT"} <= {e["name"] for e in api_c["env"]}
    assert "RELAY_WORKER_THREADS" in {e["name"] for e in worker_c["env"]}
    [service] = [d for d in docs if d["kind"] == "Service" and not str(d["metadata"]["name"]).endswith("-worker")]
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    # The workers' headless Service is only their /metrics, for the ServiceMonitor.
    assert by_name(docs, "Service", "-worker")["spec"]["ports"][0]["targetPort"] == "metrics"


def test_pods_run_as_non_root_with_a_read_only_root() -> None:
    v = values()
    pod, container = v["podSecurityContext"], v["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0 and pod["runAsGroup"] != 0
    assert container["allowPrivilegeEscalation"] is False and container["readOnlyRootFilesystem"] is True
    assert container["capabilities"]["drop"] == ["ALL"]
    # The image's user (deploy/Dockerfile) is the one the chart runs as.
    assert f"--uid {pod['runAsUser']}" in (DEPLOY / "Dockerfile").read_text()
    for name in ("api-deployment.yaml", "worker-deployment.yaml"):
        text = (TEMPLATES / name).read_text()
        assert "toYaml .Values.podSecurityContext" in text and "toYaml .Values.securityContext" in text


def test_worker_hpa_scales_on_the_exported_queue_depth() -> None:
    hpa = by_name(rendered_docs(), "HorizontalPodAutoscaler", "-worker")
    assert hpa["spec"]["scaleTargetRef"]["kind"] == "Deployment"
    [metric] = hpa["spec"]["metrics"]
    assert metric["type"] == "External" and metric["external"]["target"]["type"] == "AverageValue"
    auto = values()["worker"]["autoscaling"]
    assert auto["metricName"] == "relay_queue_depth" and auto["metricName"] in HELP
    assert 1 <= auto["minReplicas"] <= auto["maxReplicas"]
    text = (TEMPLATES / "worker-hpa.yaml").read_text()
    assert "prometheus-adapter" in text and "external.metrics.k8s.io" in text  # the adapter it needs


def test_secrets_stay_out_of_the_config_map() -> None:
    v = values()
    secret_text = (TEMPLATES / "secret.yaml").read_text()
    assert "RELAY_REDIS__URL" in secret_text and ".Values.secrets" in secret_text
    config_text = yaml.safe_dump(v["config"])
    for name in v["secrets"]:  # referenced, never inlined; a RELAY_<KEY> one sets its key through _FILE
        assert "${" + name + "}" in config_text or name == "RELAY_PREFERENCES__SECRET", name
    assert "redis" not in v["config"] and not v["redis"]["url"]  # the URL may hold a password: Secret only


def test_the_chart_config_is_a_valid_relay_config(tmp_path: Path) -> None:
    """values.yaml's `config`, with the environment the chart gives the pods, passes relay's own loader."""
    v = values()
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(v["config"]))
    # The Secret as the pods see it: a file each (/run/secrets/relay/NAME), named by NAME_FILE.
    secrets = {name: f"json://127.0.0.1:9/{name.lower()}" for name in v["secrets"]}
    secrets |= {"RELAY_WEBHOOK_TOKEN": "w" * 24, "RELAY_ADMIN_TOKEN": "a" * 24, "RELAY_PREFERENCES__SECRET": "p" * 32}
    secrets |= {"RELAY_REDIS__URL": "redis://redis:6379/0"}
    environ = {}
    for name, value in secrets.items():
        (tmp_path / name).write_text(value + "\n")
        environ[f"{name}_FILE"] = str(tmp_path / name)
    environ |= {
        "RELAY_SERVER__HOST": "0.0.0.0",
        "RELAY_SERVER__PORT": str(v["api"]["port"]),
        "RELAY_DATA_DIR": "/data",
        "RELAY_WORKER_THREADS": str(v["worker"]["threads"]),
    }
    config = load_config(file, environ)
    assert config.server.host == "0.0.0.0" and config.server.port == v["api"]["port"]
    assert config.redis.url == "redis://redis:6379/0" and config.worker_threads == v["worker"]["threads"]
    assert config.server.auth.enabled and config.server.admin_tokens == ["a" * 24]
    assert config.server.auth.tokens == ["w" * 24] and config.preferences.secret == "p" * 32
    assert config.channels["owners-slack"].url == "json://127.0.0.1:9/owners_slack_url"
    (tmp_path / "RELAY_ADMIN_TOKEN").unlink()  # a key the Secret lacks: named, as an unset variable is
    with pytest.raises(ConfigError) as refused:
        load_config(file, environ)
    assert refused.value.problems == ["server.admin_tokens[0]: RELAY_ADMIN_TOKEN_FILE names a file that cannot be read"]


def test_secrets_are_files_named_by_their_file_variables_the_preference_secret_too() -> None:
    docs = rendered_docs()
    for suffix in ("-api", "-worker"):
        spec = by_name(docs, "Deployment", suffix)["spec"]["template"]["spec"]
        [container] = spec["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert not any(name in env for name in values()["secrets"])  # no secret value in the environment
        volumes = {vol["name"]: vol for vol in spec["volumes"]}
        assert volumes["secrets"]["secret"]["defaultMode"] == 0o440  # the pod's group (fsGroup) reads them
        if HELM:
            assert env["RELAY_WEBHOOK_TOKEN_FILE"] == "/run/secrets/relay/RELAY_WEBHOOK_TOKEN"
            assert env["RELAY_PREFERENCES__SECRET_FILE"] == "/run/secrets/relay/RELAY_PREFERENCES__SECRET"
            assert env["RELAY_REDIS__URL_FILE"] == "/run/secrets/relay/RELAY_REDIS__URL"
    helpers = (TEMPLATES / "_helpers.tpl").read_text()
    assert "_FILE\n  value: /run/secrets/relay/{{ . }}" in helpers and "secretKeyRef" not in helpers
    assert "RELAY_PREFERENCES__SECRET" in values()["secrets"]
    assert "RELAY_REDIS__URL_FILE" in helpers and "existingSecretKeys" in helpers


def test_worker_probes_replicas_and_disruption_budgets_never_block_a_drain() -> None:
    docs = rendered_docs()
    worker = by_name(docs, "Deployment", "-worker")
    [container] = worker["spec"]["template"]["spec"]["containers"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["exec"]["command"] == ["relay", "health", "--worker"], probe
    health = parser()._subparsers._group_actions[0].choices["health"]  # type: ignore[union-attr]
    assert "--worker" in health._option_string_actions
    assert "replicas" in worker["spec"]
    v = values()["worker"]
    assert v["autoscaling"]["minReplicas"] >= 1 and v["replicas"] >= 1
    assert (
        "ternary .Values.worker.autoscaling.minReplicas .Values.worker.replicas"
        in (TEMPLATES / "worker-deployment.yaml").read_text()
    )
    for pdb in (d for d in docs if d["kind"] == "PodDisruptionBudget"):
        assert "minAvailable" not in pdb["spec"] and "maxUnavailable" in pdb["spec"]
    for role in ("api", "worker"):
        assert values()[role]["podDisruptionBudget"] == {"enabled": True, "maxUnavailable": 1}


def _paths(ingress: dict[str, Any]) -> dict[str, str]:
    [rule] = ingress["spec"]["rules"]
    return {p["path"]: p["pathType"] for p in rule["http"]["paths"]}


def test_the_public_ingress_carries_the_webhook_and_peoples_pages_only() -> None:
    docs = rendered_docs()
    public, internal = by_name(docs, "Ingress", "-public"), by_name(docs, "Ingress", "-internal")
    webhook = values()["config"]["server"]["path"] if HELM else PLACEHOLDER
    assert _paths(public) == {webhook: "Exact", "/preferences/": "Prefix", "/unsubscribe/": "Prefix"}
    # The routes of relay's app that these prefixes reach are exactly the public ones.
    app = (DEPLOY.parent / "relay" / "runtime" / "app.py").read_text()
    public_routes = set(re.findall(r'Route\("(/(?:preferences|unsubscribe)/[^"]*)"', app))
    assert public_routes == {"/preferences/{token}", "/unsubscribe/{token}"}
    for path in _paths(public):
        assert not path.startswith(("/ui", "/api", "/metrics", "/openapi")), path
    assert _paths(internal) == {"/": "Prefix"}
    for ingress in (public, internal):
        for p in ingress["spec"]["rules"][0]["http"]["paths"]:
            assert p["backend"]["service"]["port"] == {"name": "http"}  # the Service's port name
    v = values()["ingress"]
    assert v["public"]["enabled"] is False and v["internal"]["enabled"] is False  # opt-in: hosts are yours


def test_values_are_right_about_sentinel_and_replicas() -> None:
    from relay.config.urls import SENTINEL

    text = (CHART / "values.yaml").read_text()
    assert "not supported" not in text.lower() and "one URL today" not in text
    assert f"{SENTINEL}://" in text
    redis = values()["redis"]
    assert redis["minReplicas"] == 0 and redis["replicaTimeout"] == "1s"
    helpers = (TEMPLATES / "_helpers.tpl").read_text()
    assert "RELAY_REDIS__MIN_REPLICAS" in helpers and "RELAY_REDIS__REPLICA_TIMEOUT" in helpers
    assert "{{- if .Values.redis.minReplicas }}" in helpers  # 0: nothing set, the config's default


def test_the_chart_version_names_relays_version() -> None:
    import relay

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == relay.__version__


def _values_paths(text: str) -> set[str]:
    return set(re.findall(r"\.Values\.([A-Za-z0-9_.]+)", text))


def test_templates_use_only_values_that_exist() -> None:
    v = values()
    for path in [*template_files(), TEMPLATES / "_helpers.tpl", TEMPLATES / "NOTES.txt"]:
        for dotted in _values_paths(path.read_text()):
            node: Any = v
            for part in dotted.split("."):
                assert isinstance(node, dict) and part in node, f"{path.name}: .Values.{dotted} is not in values.yaml"
                node = node[part]


def test_includes_name_defined_templates_and_blocks_are_balanced() -> None:
    helpers = (TEMPLATES / "_helpers.tpl").read_text()
    defined = set(re.findall(r'\{\{-?\s*define\s+"([^"]+)"', helpers))
    assert {"relay.fullname", "relay.labels", "relay.selectorLabels", "relay.env"} <= defined
    for path in [*template_files(), TEMPLATES / "_helpers.tpl", TEMPLATES / "NOTES.txt"]:
        text = path.read_text()
        for name in re.findall(r'include\s+"([^"]+)"', text):
            assert name in defined, f"{path.name}: include of undefined {name!r}"
        actions = [a.strip("{}- ") for a in ACTION.findall(text)]
        opened = sum(1 for a in actions if re.match(r"(if|with|range|define)\b", a))
        closed = sum(1 for a in actions if a == "end")
        assert opened == closed, f"{path.name}: {opened} blocks opened, {closed} closed"


# -- Grafana dashboard ----------------------------------------------------------------------------

PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "rate", "irate", "increase", "histogram_quantile", "by", "without",
    "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "topk", "bottomk",
    "label_values", "clamp_min", "clamp_max", "abs", "vector", "scalar", "delta",
}  # fmt: skip
LABELS = {"kind", "status", "reason", "state", "channel", "result", "le", "job", "instance", "endpoint", "action"}


def exported_metrics() -> set[str]:
    names = set(HELP)
    for name, (kind, _) in HELP.items():
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    return names


def promql_names(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, label names) an expression uses."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    metrics: set[str] = set()
    labels: set[str] = set()
    for metric, label in re.findall(r"label_values\(\s*([A-Za-z_:][\w:]*)[^,]*,\s*(\w+)\s*\)", e):
        metrics.add(metric)
        labels.add(label)
    e = re.sub(r"label_values\([^)]*\)", "", e)
    for matchers in re.findall(r"\{([^}]*)\}", e):
        labels |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    for grouping in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", e):
        labels |= {label.strip() for label in grouping.split(",") if label.strip()}
    e = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", e)
    metrics |= {w for w in re.findall(r"(?<![\w.$])[A-Za-z_:][\w:]*", e) if w not in PROMQL_WORDS}
    return metrics, labels


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    exprs = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            exprs.extend(t["expr"] for t in panel.get("targets", []))
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def test_promql_name_extraction() -> None:
    metrics, labels = promql_names(
        'sum by (state) (max by (state, channel) (rate(relay_deliveries_total{job=~"$job", state="x"}[5m])))'
        " / max(relay_up) unless on (job) nope_total"
    )
    assert metrics == {"relay_deliveries_total", "relay_up", "nope_total"}
    assert labels == {"state", "channel", "job"}
    assert promql_names("histogram_quantile(0.95, max by (le) (rate(a_bucket[$__rate_interval])))")[0] == {"a_bucket"}


def test_dashboard_is_valid_json_for_grafana() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 30
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 10
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & mine, f"panel {panel['title']!r} overlaps another"
        cells |= mine
        if panel["type"] != "row":
            assert panel["targets"] and all(t["expr"].strip() and t["refId"] for t in panel["targets"])
            assert panel["datasource"]["uid"] == "${datasource}"
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for expr in dashboard_exprs(dashboard):
        for name in re.findall(r"\$(\w+)", expr):
            assert name.startswith("__") or name in variables, f"undefined variable ${name} in {expr}"


def test_dashboard_queries_name_only_metrics_relay_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = exported_metrics()
    used: set[str] = set()
    for expr in dashboard_exprs(dashboard):
        metrics, labels = promql_names(expr)
        assert metrics, f"no metric in {expr}"
        assert metrics <= exported, f"{expr}: {sorted(metrics - exported)} not exported by relay"
        assert labels <= LABELS, f"{expr}: unknown labels {sorted(labels - LABELS)}"
        used |= metrics
    # Every family relay exports is on the dashboard, the latency histogram through its buckets.
    families = {m.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum") for m in used}
    missing = sorted(set(HELP) - families)
    assert not missing, f"add a panel for {missing} to deploy/grafana/relay-dashboard.json"
    titles = " ".join(p["title"].lower() for p in dashboard["panels"])
    for word in ("received", "duplicates", "rejected", "state", "channel", "latency", "queue", "failed", "workers"):
        assert word in titles


def test_dashboard_latency_panel_has_p50_and_p95() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = " ".join(dashboard_exprs(dashboard))
    for q in ("0.5", "0.95"):
        assert f"histogram_quantile({q}, sum by (le) (rate(relay_delivery_latency_seconds_bucket" in exprs


COUNTERS_AND_HISTOGRAMS = re.compile(r"\b(max|min|avg)\b(?: by \([^)]*\))? ?\((?:rate|increase)\(")


def test_dashboard_sums_counters_over_every_process_and_takes_max_of_fleet_gauges() -> None:
    # Each process exports what it counted itself (docs/fleet.md): a counter's rate is summed over the
    # processes, never a max() of them; the gauges of the fleet's state are the same in each API pod.
    exprs = dashboard_exprs(json.loads(DASHBOARD.read_text()))
    assert [e for e in exprs if COUNTERS_AND_HISTOGRAMS.search(e)] == []
    for expr in exprs:
        if "relay_queue_depth" in expr or "relay_workers_alive" in expr:
            assert expr.startswith("max("), expr


def test_the_service_monitor_scrapes_the_workers_too() -> None:
    monitor = (TEMPLATES / "servicemonitor.yaml").read_text()
    assert "port: metrics" in monitor and "component: api" not in monitor
    service = (TEMPLATES / "worker-service.yaml").read_text()
    assert "clusterIP: None" in service and "name: metrics" in service
    worker = (TEMPLATES / "worker-deployment.yaml").read_text()
    assert "RELAY_METRICS__PORT" in worker and "containerPort: {{ .Values.metrics.workerPort }}" in worker
    assert values()["metrics"]["workerPort"]


# -- Alerts and the dashboard in the chart --------------------------------------------------------


def _rules() -> list[dict[str, Any]]:
    [group] = yaml.safe_load(RULES.read_text())["groups"]
    rules: list[dict[str, Any]] = group["rules"]
    return rules


def test_the_chart_ships_the_rules_and_the_dashboard_files_as_they_are() -> None:
    files = CHART / "files"
    assert (files / "relay-rules.yaml").resolve() == RULES.resolve()
    assert (files / "relay-dashboard.json").resolve() == DASHBOARD.resolve()
    rule = (TEMPLATES / "prometheusrule.yaml").read_text()
    assert '.Files.Get "files/relay-rules.yaml" | nindent 2' in rule and "kind: PrometheusRule" in rule
    board = (TEMPLATES / "dashboard-configmap.yaml").read_text()
    assert '.Files.Get "files/relay-dashboard.json" | nindent 4' in board
    assert values()["metrics"]["grafanaDashboard"]["labels"] == {"grafana_dashboard": "1"}  # the sidecar's default
    docs = rendered_docs()
    dashboard = by_name(docs, "ConfigMap", "-dashboard")
    prometheus_rule = by_name(docs, "PrometheusRule", "")
    if HELM:
        assert json.loads(dashboard["data"]["relay-dashboard.json"]) == json.loads(DASHBOARD.read_text())
        assert prometheus_rule["spec"] == yaml.safe_load(RULES.read_text())


def test_the_alerts_are_operations_md_s_and_use_only_exported_metrics() -> None:
    exported = exported_metrics()
    operations = (DEPLOY.parent / "docs" / "operations.md").read_text()
    for rule in _rules():
        metrics, labels = promql_names(rule["expr"])
        assert metrics and metrics <= exported, rule["expr"]
        assert labels <= LABELS, rule["expr"]
        assert rule["labels"]["severity"] in {"critical", "warning"} and rule["annotations"]["summary"]
        assert f"`{rule['alert']}`" in operations, f"docs/operations.md does not name {rule['alert']}"
        for metric in metrics:
            assert f"`{metric}`" in operations, metric


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
def test_promtool_accepts_the_rules_and_they_fire_as_meant(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    checked = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0 and f"SUCCESS: {len(_rules())} rules found" in checked.stdout, checked
    # Two API pods, then no worker beat for 3 minutes; a channel down for 12: those alerts fire, no other.
    cases = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": 'relay_workers_alive{job="relay",instance="a"}', "values": "2 2 0 0 0 0"},
                    {"series": 'relay_workers_alive{job="relay",instance="b"}', "values": "2 2 0 0 0 0"},
                    {"series": 'relay_up{job="relay",instance="a"}', "values": "1x15"},
                    {"series": 'relay_channel_up{job="relay",instance="a",channel="ops"}', "values": "0x15"},
                    {"series": 'relay_deliveries_failed_kept{job="relay",instance="a"}', "values": "3x15"},
                    {"series": 'relay_auth_throttled_total{job="relay",instance="a"}', "values": "0x15"},
                ],
                "alert_rule_test": [
                    {"eval_time": "5m", "alertname": "RelayNoWorkers", "exp_alerts": [
                        {"exp_labels": {"severity": "critical", "job": "relay"}}]},
                    {"eval_time": "5m", "alertname": "RelayRedisUnreachable", "exp_alerts": []},
                    {"eval_time": "5m", "alertname": "RelayChannelDown", "exp_alerts": []},
                    {"eval_time": "12m", "alertname": "RelayChannelDown", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "job": "relay", "channel": "ops"}}]},
                    {"eval_time": "12m", "alertname": "RelayFailedDeliveriesGrowing", "exp_alerts": []},
                    {"eval_time": "12m", "alertname": "RelayCredentialsGuessed", "exp_alerts": []},
                ],
            }
        ],
    }  # fmt: skip
    annotations = {r["alert"]: r["annotations"] for r in _rules()}
    for case in cases["tests"][0]["alert_rule_test"]:  # type: ignore[index]
        for alert in case["exp_alerts"]:
            alert["exp_annotations"] = {
                key: text.replace("{{ $labels.channel }}", "ops")
                for key, text in annotations[case["alertname"]].items()
            }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(cases))
    tested = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "tests.yaml")], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_deploy_md_answers_a_newcomers_questions_once() -> None:
    docs = DEPLOY.parent / "docs"
    deploy = (docs / "deploy.md").read_text()
    for heading in ("### Secrets as files", "### Probes, replicas and disruptions", "### Custom templates",
                    "### Upgrading: workers before the API", "### Alerts and the dashboard"):  # fmt: skip
        assert deploy.count(heading) == 1, heading
    for fact in (
        "is sent to both, the sentinels and the primary",  # whose password a redis+sentinel:// URL holds
        "`redis+sentinel://` speaks plain TCP",  # TLS
        "`down-after-milliseconds` 5000",  # how many sentinels, how quick
        "--set api.imageTag=0.1.0",  # workers first
        "`relay_queue_depth` counts the notifications waiting to be planned and the deliveries due now",
    ):
        assert deploy.count(fact) == 1, fact
    # One place for the chart's install command: deploy.md.
    assert all("helm install" not in page.read_text() for page in docs.glob("*.md") if page.name != "deploy.md")
    assert (
        "(default (default .Chart.AppVersion .Values.image.tag) .Values.api.imageTag)"
        in (TEMPLATES / "_helpers.tpl").read_text()
    )
    assert 'include "relay.apiImage"' in (TEMPLATES / "api-deployment.yaml").read_text()
