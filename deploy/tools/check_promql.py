#!/usr/bin/env python3
"""Checks every PromQL expression that ships in deploy/ against the metric
contract (docs/api.md §2): the Grafana dashboard's panels, the alert and
recording rules, the KEDA query and the prometheus-adapter rule. A name or
label that loomd does not export, or a finish_reason it never sets, is an
error. The dashboard's expressions are also parsed by promtool.

    deploy/tools/check_promql.py        # exit 1 and one line per problem
"""
import json
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

import contract

BUILTIN_SERIES = {"up"}
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset"}

# What the issue asks the dashboard to show, as the metrics that show it.
DASHBOARD_MUST_SHOW = [
    "loom_requests_total", "loom_time_to_first_token_seconds", "loom_inter_token_latency_seconds",
    "loom_request_duration_seconds", "loom_requests_running", "loom_requests_waiting",
    "loom_kv_cache_usage_ratio", "loom_prefix_cache_hits_total", "loom_prefix_cache_queries_total",
    "loom_generation_tokens_total", "loom_batch_size", "loom_preemptions_total",
    "loom_engine_step_duration_seconds",
]
QUANTILE_PANELS = ["loom_time_to_first_token_seconds", "loom_inter_token_latency_seconds",
                   "loom_request_duration_seconds"]


def _strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def _series_index(metrics):
    index = {}
    for metric in metrics.values():
        for series in metric.series_names():
            index[series] = metric
    return index


def check_expr(expr, where, metrics, recorded=()):
    """Problems with one PromQL expression: unknown series, labels, values."""
    index = _series_index(metrics)
    problems = []
    bare = _strip_strings(expr)
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # ranges such as [5m] or [$__rate_interval]
    bare = re.sub(r"\{[^}]*\}", "", bare)
    # Label lists of by/without/on/ignoring are not series names.
    grouping = re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)",
                          bare)
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
    used = []
    for match in re.finditer(NAME, bare):
        token = match.group(0)
        following = bare[match.end():].lstrip()
        if token in KEYWORDS or following.startswith("("):
            continue  # a function call or a keyword
        if re.fullmatch(r"\d.*", token):
            continue
        if token.startswith("$"):
            continue
        if bare[:match.start()].endswith("$"):
            continue  # a dashboard variable such as $job
        if token in index:
            used.append(index[token])
        elif token in recorded or token in BUILTIN_SERIES:
            continue
        else:
            problems.append(f"{where}: unknown series {token!r} in {expr!r}")
    known_labels = set(contract.TARGET_LABELS)
    for metric in used:
        known_labels |= set(metric.labels)
    for labels in grouping:
        for label in (label.strip() for label in labels.split(",")):
            if label and label not in known_labels:
                problems.append(f"{where}: label {label!r} is on none of the series of {expr!r}")
    for selector in re.finditer(r"(" + NAME + r")\s*\{([^}]*)\}", expr):
        metric = index.get(selector.group(1))
        if metric is None:
            continue
        for label, op, value in re.findall(r'(\w+)\s*(=~|!=|!~|=)\s*"([^"]*)"', selector.group(2)):
            if label not in metric.labels and label not in contract.TARGET_LABELS:
                problems.append(f"{where}: {metric.name} has no label {label!r}")
            allowed = metric.labels.get(label)
            if op == "=" and allowed and value not in allowed:
                problems.append(f"{where}: {metric.name}{{{label}}} is never {value!r}")
    return problems


def dashboard_exprs(dashboard):
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            yield panel.get("title", "?"), target.get("expr", "")


def check_dashboard(dashboard, metrics):
    problems = []
    for key in ("uid", "title", "panels", "schemaVersion"):
        if key not in dashboard:
            problems.append(f"dashboard: no {key}")
    variables = {v["name"] for v in dashboard.get("templating", {}).get("list", [])}
    ids = [panel.get("id") for panel in dashboard.get("panels", [])]
    if len(ids) != len(set(ids)) or None in ids:
        problems.append("dashboard: panel ids missing or repeated")
    used = set()
    for panel in dashboard.get("panels", []):
        title = panel.get("title", "?")
        grid = panel.get("gridPos", {})
        if not all(k in grid for k in "xywh") or grid.get("x", 0) + grid.get("w", 0) > 24:
            problems.append(f"dashboard panel {title!r}: bad gridPos {grid}")
        if panel.get("type") == "row":
            continue
        targets = panel.get("targets", [])
        if not targets:
            problems.append(f"dashboard panel {title!r}: no query")
        ref_ids = [target.get("refId") for target in targets]
        if len(ref_ids) != len(set(ref_ids)):
            problems.append(f"dashboard panel {title!r}: repeated refId")
        text = json.dumps(panel)
        for variable in re.findall(r"\$\{?(\w+)", text):
            if not variable.startswith("__") and variable not in variables:
                problems.append(f"dashboard panel {title!r}: undefined variable ${variable}")
        for target in targets:
            problems += check_expr(target.get("expr", ""), f"dashboard panel {title!r}", metrics)
            used |= set(re.findall(NAME, target.get("expr", "")))
    index = _series_index(metrics)
    shown = {index[name].name for name in used if name in index}
    for name in DASHBOARD_MUST_SHOW:
        if name not in shown:
            problems.append(f"dashboard: nothing shows {name}")
    for name in QUANTILE_PANELS:
        exprs = [e for _, e in dashboard_exprs(dashboard) if name + "_bucket" in e]
        for quantile in ("0.5", "0.9", "0.99"):
            if not any(re.search(r"histogram_quantile\(\s*" + re.escape(quantile) + r"\s*,", e)
                       for e in exprs):
                problems.append(f"dashboard: no p{quantile[2:].ljust(2, '0')} of {name}")
    return problems


def check_dashboard_syntax(dashboard, promtool="promtool"):
    """promtool parses each panel query (as a recording rule)."""
    rules = []
    for i, (_, expr) in enumerate(dashboard_exprs(dashboard)):
        expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
        expr = re.sub(r"\$\{?\w+\}?", ".*", expr)
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as stream:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, stream)
        stream.flush()
        result = subprocess.run([promtool, "check", "rules", stream.name], capture_output=True,
                                text=True, check=False)
    if result.returncode != 0:
        return [f"dashboard: promtool rejects a query: {result.stdout}{result.stderr}"]
    return []


def check_rules(rules, metrics, where):
    problems = []
    recorded = {rule["record"] for group in rules["groups"] for rule in group["rules"]
                if "record" in rule}
    for group in rules["groups"]:
        for rule in group["rules"]:
            name = rule.get("record") or rule.get("alert")
            problems += check_expr(str(rule["expr"]), f"{where} {name}", metrics, recorded)
    return problems


def main():
    repo = contract.REPO
    metrics = contract.metrics()
    deploy = repo / "deploy"
    dashboard = json.loads((deploy / "grafana" / "loom-dashboard.json").read_text(encoding="utf-8"))
    problems = check_dashboard(dashboard, metrics)
    if shutil.which("promtool"):
        problems += check_dashboard_syntax(dashboard)
    else:
        problems.append("promtool not found (Debian package prometheus)")
    rules = yaml.safe_load((deploy / "prometheus" / "loom.rules.yml").read_text(encoding="utf-8"))
    problems += check_rules(rules, metrics, "loom.rules.yml")
    keda = yaml.safe_load(
        (deploy / "k8s" / "overlays" / "gpu-keda" / "scaledobject.yaml").read_text(encoding="utf-8"))
    for trigger in keda["spec"]["triggers"]:
        problems += check_expr(trigger["metadata"]["query"], "KEDA ScaledObject", metrics)
    adapter = yaml.safe_load(
        (deploy / "k8s" / "prometheus-adapter" / "values.yaml").read_text(encoding="utf-8"))
    for rule in adapter["rules"]["custom"]:
        problems += check_expr(rule["seriesQuery"], "prometheus-adapter rule", metrics)
    for problem in problems:
        print(problem)
    print(f"check_promql: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
