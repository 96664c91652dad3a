"""Checks of the inference-gateway overlay beyond the schemas: that its
pieces name each other correctly and agree with loomd.

  InferencePool   selects the loomd pods, on loomd's --http_port, and names
                  the EPP Service and its ext-proc port
  HTTPRoute       sends to that pool from a Gateway of the overlay
  EPP config      parses as an EndpointPickerConfig (schema below); every
                  pluginRef names a plugin; the engine-type label of the
                  loomd pods selects an engineConfigs entry whose specs are
                  gauges of docs/api.md §2
  KV events       loomd connects --kv_events_endpoint to the EPP Service on
                  the port that reaches the scorer's zmqEndpoint, with a
                  topic the scorer's filter takes, prefix caching on and the
                  indexer's blockSize equal to --block_size
  EPP Deployment  --pool-name is the pool, --config-file a key of the
                  mounted ConfigMap

check_manifests.py runs these on every overlay that holds an InferencePool.
"""
import re

import jsonschema
import yaml

import contract
import check_rollout

ENGINE_LABEL = "inference.networking.k8s.io/engine-type"
EPP_CONFIG_KEY = "config.yaml"

_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
_LABELS = {"type": "object", "additionalProperties": _STRING}
_PLUGIN_REF = {"type": "object", "required": ["pluginRef"], "additionalProperties": False,
               "properties": {"pluginRef": _STRING, "weight": {"type": "number"}}}


def _closed(required, properties):
    return {"type": "object", "required": required, "additionalProperties": False,
            "properties": properties}


# Spec schemas of the Inference Extension and Gateway API kinds, for the
# fields of their v1 CRDs that deployments set.
CRD_SPECS = {
    ("inference.networking.k8s.io/v1", "InferencePool"): _closed(
        ["selector", "targetPorts", "endpointPickerRef"], {
            "selector": _closed(["matchLabels"], {"matchLabels": _LABELS}),
            "targetPorts": {"type": "array", "minItems": 1, "maxItems": 8,
                            "items": _closed(["number"], {"number": _PORT})},
            "endpointPickerRef": _closed(["name", "port"], {
                "group": _STRING, "kind": {"enum": ["Service"]}, "name": _STRING,
                "port": _closed(["number"], {"number": _PORT}),
                "failureMode": {"enum": ["FailOpen", "FailClose"]}}),
        }),
    ("gateway.networking.k8s.io/v1", "Gateway"): _closed(["gatewayClassName", "listeners"], {
        "gatewayClassName": _STRING,
        "listeners": {"type": "array", "minItems": 1, "items": _closed(
            ["name", "protocol", "port"], {
                "name": _STRING, "hostname": _STRING, "port": _PORT,
                "protocol": {"enum": ["HTTP", "HTTPS", "TLS", "TCP", "UDP"]},
                "tls": {"type": "object"}, "allowedRoutes": {"type": "object"}})},
    }),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): _closed(["parentRefs", "rules"], {
        "parentRefs": {"type": "array", "minItems": 1, "items": _closed(["name"], {
            "group": _STRING, "kind": _STRING, "namespace": _STRING, "name": _STRING,
            "sectionName": _STRING, "port": _PORT})},
        "hostnames": _STRINGS,
        "rules": {"type": "array", "minItems": 1, "items": _closed([], {
            "name": _STRING,
            "matches": {"type": "array", "items": _closed([], {
                "path": _closed(["type", "value"], {
                    "type": {"enum": ["Exact", "PathPrefix", "RegularExpression"]},
                    "value": {"type": "string", "pattern": "^/"}}),
                "headers": {"type": "array"}, "queryParams": {"type": "array"},
                "method": _STRING})},
            "filters": {"type": "array"},
            "backendRefs": {"type": "array", "items": _closed(["name"], {
                "group": _STRING, "kind": _STRING, "name": _STRING, "namespace": _STRING,
                "port": _PORT, "weight": {"type": "integer", "minimum": 0}})},
            "timeouts": _closed([], {"request": _STRING, "backendRequest": _STRING}),
        })},
    }),
}

_ENGINE_CONFIG = _closed(["name", "queuedRequestsSpec", "runningRequestsSpec", "kvUsageSpec"], {
    "name": _STRING, "queuedRequestsSpec": _STRING, "runningRequestsSpec": _STRING,
    "kvUsageSpec": _STRING, "loraSpec": _STRING, "cacheInfoSpec": _STRING})

# Parameters of the plugins the overlay configures; other plugin types take
# any object.
PLUGIN_PARAMETERS = {
    "metrics-data-source": _closed([], {"scheme": {"enum": ["http", "https"]}, "path": _STRING,
                                        "insecureSkipVerify": {"type": "boolean"}}),
    "core-metrics-extractor": _closed(["engineConfigs"], {
        "engineLabelKey": _STRING, "defaultEngine": _STRING,
        "engineConfigs": {"type": "array", "minItems": 1, "items": _ENGINE_CONFIG}}),
    "precise-prefix-cache-scorer": _closed(["kvEventsConfig", "indexerConfig"], {
        "kvEventsConfig": _closed(["zmqEndpoint"], {
            "zmqEndpoint": {"type": "string", "pattern": r"^tcp://[^:/]+:\d+$"},
            "topicFilter": _STRING, "concurrency": {"type": "integer", "minimum": 1}}),
        "indexerConfig": _closed(["tokenProcessorConfig"], {
            "tokenProcessorConfig": _closed(["blockSize"], {
                "blockSize": {"type": "integer", "minimum": 1}, "hashSeed": _STRING}),
            "kvBlockIndexConfig": {"type": "object"},
            "tokenizersPoolConfig": _closed(["modelName"], {"modelName": _STRING,
                                                            "workersCount": {"type": "integer"},
                                                            "hf": {"type": "object"}})}),
    }),
}

EPP_CONFIG_SCHEMA = _closed(["apiVersion", "kind", "plugins", "schedulingProfiles"], {
    "apiVersion": {"const": "inference.networking.x-k8s.io/v1alpha1"},
    "kind": {"const": "EndpointPickerConfig"},
    "featureGates": {"type": "array", "items": {"enum": ["dataLayer", "flowControl"]}},
    "plugins": {"type": "array", "minItems": 1, "items": _closed(["type"], {
        "type": _STRING, "name": _STRING, "parameters": {"type": "object"}})},
    "schedulingProfiles": {"type": "array", "minItems": 1, "items": _closed(["name", "plugins"], {
        "name": _STRING, "plugins": {"type": "array", "minItems": 1, "items": _PLUGIN_REF}})},
    "data": _closed(["sources"], {"sources": {"type": "array", "items": _closed(["pluginRef"], {
        "pluginRef": _STRING,
        "extractors": {"type": "array", "items": _closed(["pluginRef"], {
            "pluginRef": _STRING})}})}}),
    "saturationDetector": _PLUGIN_REF,
    "flowControl": {"type": "object"},
    "parser": _PLUGIN_REF,
})


def _schema_problems(schema, value, where):
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(value), key=str)
    return [f"{where}: {'.'.join(map(str, e.path))}: {e.message}" for e in errors]


def _find(objects, kind, name=None):
    return [obj for obj in objects
            if obj.get("kind") == kind and name in (None, obj["metadata"].get("name"))]


def _matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _pod(deployment):
    return deployment["spec"]["template"]


def _flag(args, name):
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    return values[-1] if values else None


def _container_port(container, target):
    if isinstance(target, int):
        return target
    return next((p["containerPort"] for p in container.get("ports", [])
                 if p.get("name") == target), None)


def epp_config(objects, epp_deployment):
    """The EndpointPickerConfig the EPP reads, and problems finding it."""
    pod = _pod(epp_deployment)["spec"]
    container = pod["containers"][0]
    path = _flag(container.get("args", []), "config-file")
    if path is None:
        return None, ["EPP Deployment has no --config-file"]
    directory, _, key = path.rpartition("/")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        if mount["mountPath"].rstrip("/") != directory:
            continue
        config_map = volumes.get(mount["name"], {}).get("configMap", {}).get("name")
        found = _find(objects, "ConfigMap", config_map)
        if found and key in found[0].get("data", {}):
            return yaml.safe_load(found[0]["data"][key]), []
    return None, [f"EPP --config-file {path} is not a key of a mounted ConfigMap"]


def _plugins(config):
    """Plugin instances by name (an instance without a name is named by its type)."""
    return {p.get("name", p["type"]): p for p in config.get("plugins", [])}


def check_epp_config(config):
    """Schema and reference problems of an EndpointPickerConfig."""
    problems = _schema_problems(EPP_CONFIG_SCHEMA, config, "EndpointPickerConfig")
    if problems:
        return problems
    plugins = _plugins(config)
    for name, plugin in plugins.items():
        schema = PLUGIN_PARAMETERS.get(plugin["type"])
        if schema is not None:
            problems += _schema_problems(schema, plugin.get("parameters", {}), f"plugin {name}")
    refs = [ref["pluginRef"] for profile in config["schedulingProfiles"]
            for ref in profile["plugins"]]
    for source in config.get("data", {}).get("sources", []):
        refs += [source["pluginRef"]] + [e["pluginRef"] for e in source.get("extractors", [])]
    problems += [f"pluginRef {ref} names no plugin" for ref in refs if ref not in plugins]
    return problems


def _of_type(config, plugin_type):
    return next((p for p in config.get("plugins", []) if p["type"] == plugin_type), None)


def _check_metrics(config, pod_labels):
    extractor = _of_type(config, "core-metrics-extractor")
    if extractor is None:
        return ["EPP config has no core-metrics-extractor"]
    parameters = extractor.get("parameters", {})
    label_key = parameters.get("engineLabelKey", ENGINE_LABEL)
    engine = pod_labels.get(label_key)
    if engine is None:
        return [f"loomd pods lack the label {label_key}"]
    entry = next((e for e in parameters.get("engineConfigs", []) if e["name"] == engine), None)
    if entry is None:
        return [f"no engineConfigs entry for engine type {engine}"]
    documented = contract.metrics()
    problems = []
    for field in ("queuedRequestsSpec", "runningRequestsSpec", "kvUsageSpec", "cacheInfoSpec"):
        spec = entry.get(field, "")
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", spec)
        metric = documented.get(name.group(0)) if name else None
        if metric is None:
            problems.append(f"engineConfigs {engine}.{field} {spec!r} is not a loomd metric")
        elif metric.kind != "gauge":
            problems.append(f"engineConfigs {engine}.{field} {spec} is a {metric.kind}, "
                            "the EPP reads a gauge")
    return problems


def _check_kv_events(config, objects, loomd, epp_service, epp_container):
    scorer = _of_type(config, "precise-prefix-cache-scorer")
    if scorer is None:
        return []
    parameters = scorer["parameters"]
    flags = check_rollout.loomd_flags(objects, loomd)
    problems = []
    endpoint = flags.get("kv_events_endpoint", "")
    match = re.fullmatch(r"tcp://([^:/*]+):(\d+)", endpoint)  # `*` would bind
    listen = int(parameters["kvEventsConfig"]["zmqEndpoint"].rsplit(":", 1)[1])
    if match is None:
        problems.append(f"loomd --kv_events_endpoint {endpoint!r} must connect to "
                        f"tcp://{epp_service['metadata']['name']}:PORT")
    else:
        host, port = match.group(1), int(match.group(2))
        if host.split(".")[0] != epp_service["metadata"]["name"]:
            problems.append(f"loomd sends KV events to {host}, not the EPP Service "
                            f"{epp_service['metadata']['name']}")
        service_port = next((p for p in epp_service["spec"]["ports"] if p["port"] == port), None)
        target = None if service_port is None else _container_port(
            epp_container, service_port.get("targetPort", port))
        if target != listen:
            problems.append(f"EPP Service port {port} does not reach the scorer's zmqEndpoint "
                            f"port {listen}")
    topic_filter = parameters["kvEventsConfig"].get("topicFilter", "")
    if not flags.get("kv_events_topic", "").startswith(topic_filter):
        problems.append(f"loomd --kv_events_topic {flags.get('kv_events_topic')!r} does not "
                        f"start with the scorer's topicFilter {topic_filter!r}")
    if flags.get("enable_prefix_caching", "false") != "true":
        problems.append("KV events need --enable_prefix_caching=true")
    block_size = flags.get("block_size") or contract.flag_default("block_size")[0]
    indexer = parameters["indexerConfig"]["tokenProcessorConfig"]["blockSize"]
    if indexer != int(block_size):
        problems.append(f"indexer blockSize {indexer} differs from loomd --block_size "
                        f"{block_size}")
    return problems


def check(objects):
    """Problems of an overlay holding an InferencePool."""
    pools = _find(objects, "InferencePool")
    if len(pools) != 1:
        return [f"expected one InferencePool, found {len(pools)}"]
    pool = pools[0]["spec"]
    loomd = check_rollout.loomd_deployment(objects)
    labels = _pod(loomd)["metadata"].get("labels", {})
    problems = []
    if not _matches(pool["selector"]["matchLabels"], labels):
        problems.append("InferencePool selector does not select the loomd pods")
    http_port = int(check_rollout.loomd_flags(objects, loomd).get("http_port") or
                    contract.flag_default("http_port")[0])
    if [p["number"] for p in pool["targetPorts"]] != [http_port]:
        problems.append(f"InferencePool targetPorts must be loomd's --http_port {http_port}")

    ref = pool["endpointPickerRef"]
    services = _find(objects, "Service", ref["name"])
    if not services:
        return problems + [f"endpointPickerRef names no Service {ref['name']}"]
    service = services[0]
    epps = [d for d in _find(objects, "Deployment")
            if _matches(service["spec"].get("selector"), _pod(d)["metadata"].get("labels", {}))]
    if len(epps) != 1:
        return problems + [f"Service {ref['name']} selects {len(epps)} Deployments, not the EPP"]
    epp_container = _pod(epps[0])["spec"]["containers"][0]
    ext_proc = next((p for p in service["spec"]["ports"] if p["port"] == ref["port"]["number"]),
                    None)
    if ext_proc is None:
        problems.append(f"Service {ref['name']} has no port {ref['port']['number']}")
    grpc_port = int(_flag(epp_container.get("args", []), "grpc-port") or 9002)
    if ext_proc is not None and _container_port(
            epp_container, ext_proc.get("targetPort", ext_proc["port"])) != grpc_port:
        problems.append(f"Service {ref['name']} port {ref['port']['number']} does not reach the "
                        f"EPP's --grpc-port {grpc_port}")
    if _flag(epp_container.get("args", []), "pool-name") != pools[0]["metadata"]["name"]:
        problems.append("EPP --pool-name is not the InferencePool's name")

    gateways = {g["metadata"]["name"] for g in _find(objects, "Gateway")}
    routed = False
    for route in _find(objects, "HTTPRoute"):
        for parent in route["spec"]["parentRefs"]:
            if parent.get("kind", "Gateway") == "Gateway" and parent["name"] not in gateways:
                problems.append(f"HTTPRoute {route['metadata']['name']} names no Gateway "
                                f"{parent['name']}")
        for rule in route["spec"]["rules"]:
            for backend in rule.get("backendRefs", []):
                if (backend.get("group"), backend.get("kind")) == (
                        "inference.networking.k8s.io", "InferencePool"):
                    if backend["name"] == pools[0]["metadata"]["name"]:
                        routed = True
                    else:
                        problems.append(f"HTTPRoute sends to an InferencePool {backend['name']} "
                                        "that the overlay lacks")
    if not routed:
        problems.append("no HTTPRoute sends to the InferencePool")

    config, config_problems = epp_config(objects, epps[0])
    if config is None:
        return problems + config_problems
    config_problems = check_epp_config(config)
    if config_problems:
        return problems + config_problems
    problems += _check_metrics(config, labels)
    problems += _check_kv_events(config, objects, loomd, service, epp_container)
    return problems
