"""What the deploy checks compare against: the metric table of docs/api.md §2
and loomd's flag defaults (the ABSL_FLAG definitions in server/main.cc, or the
flag table of docs/api.md §3 where main.cc does not define a flag)."""
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]

# The overlays of deploy/k8s/overlays that CI renders and checks.
OVERLAYS = ("gpu", "cpu", "gpu-keda", "inference-gateway", "gpu-secure")

# Labels every scraped series carries besides its own (Prometheus target
# labels, the Operator's and the histogram bucket bound).
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint", "le"}


class Metric:
    def __init__(self, name, kind, labels):
        self.name = name
        self.kind = kind  # counter, gauge, histogram
        self.labels = labels  # label name -> allowed values (empty set = any)

    def series_names(self):
        if self.kind == "histogram":
            return {self.name + suffix for suffix in ("_bucket", "_sum", "_count")}
        return {self.name}


def _section(text, title_prefix):
    start = text.index(title_prefix)
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def metrics(repo=REPO):
    """The metrics of docs/api.md §2, by name."""
    section = _section((repo / "docs" / "api.md").read_text(encoding="utf-8"),
                       "## 2. Prometheus metrics")
    result = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.match(r"(loom|process)_", cells[0]):
            continue
        names = re.findall(r"\b(?:loom|process)_[a-z_]+", cells[0])
        kind = cells[1].split()[0] if cells[1] else ""
        if kind.startswith("standard"):
            kinds = {"process_cpu_seconds_total": "counter"}
        else:
            kinds = {}
        labels = {}
        for match in re.finditer(r"([a-z_]+) = ([a-z_, ]+?)(?:$|[;(])", cells[2]):
            labels[match.group(1)] = {v.strip() for v in match.group(2).split(",") if v.strip()}
        if not labels and re.fullmatch(r"[a-z_]+(, [a-z_]+)*", cells[2]):
            labels = {name: set() for name in cells[2].split(", ")}
        for name in names:
            result[name] = Metric(name, kinds.get(name, kind if kind != "standard" else "gauge"),
                                  labels)
    return result


_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def parse_duration(text):
    """Seconds in an absl/Go duration such as 30s, 1m30s or 500ms."""
    text = text.strip()
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


_ABSL_DURATION = {"Milliseconds": 0.001, "Seconds": 1, "Minutes": 60, "Hours": 3600}


def _main_cc_default(source, flag):
    match = re.search(r"ABSL_FLAG\(\s*([\w:<>]+)\s*,\s*" + re.escape(flag) + r"\s*,\s*(.+?),\s*\"",
                      source, re.S)
    if not match:
        return None
    kind, value = match.group(1), match.group(2).strip()
    if kind == "absl::Duration":
        call = re.fullmatch(r"absl::(\w+)\(\s*(\d+(?:\.\d+)?)\s*\)", value)
        if not call or call.group(1) not in _ABSL_DURATION:
            raise ValueError(f"cannot read the default of --{flag}: {value}")
        return f"{float(call.group(2)) * _ABSL_DURATION[call.group(1)]:g}s"
    return value.strip('"')


def _api_md_default(text, flag):
    section = _section(text, "## 3. Command line")
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        names = re.findall(r"--(\w+)", cells[0])
        if flag in names:
            values = [v.strip() for v in cells[1].split("/")]
            return values[names.index(flag)] if len(values) == len(names) else values[0]
    return None


def flag_default(flag, repo=REPO):
    """(default, source) of a loomd flag: server/main.cc first, then docs/api.md."""
    main_cc = repo / "server" / "main.cc"
    if main_cc.exists():
        value = _main_cc_default(main_cc.read_text(encoding="utf-8"), flag)
        if value is not None:
            return value, "server/main.cc"
    value = _api_md_default((repo / "docs" / "api.md").read_text(encoding="utf-8"), flag)
    if value is None:
        raise KeyError(f"no default for --{flag} in server/main.cc or docs/api.md")
    return value, "docs/api.md"
