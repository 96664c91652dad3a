#!/usr/bin/env python3
"""Checks that the rendered manifests agree with loomd's flags on how a pod
starts, serves and drains:

  terminationGracePeriodSeconds > preStop sleep + --drain_timeout
      (SIGTERM comes after preStop; loomd then drains for up to
      --drain_timeout and exits before the kubelet's SIGKILL)
  startupProbe: gRPC health of loom.v1.GenerationService on --port (with TLS
      on, --health_port: the kubelet's gRPC probes speak plaintext), with room
      for the model to load (at least MIN_STARTUP_SECONDS)
  readinessProbe: the same gRPC check, noticing NOT_SERVING within --drain_timeout
  livenessProbe: HTTP GET /healthz on --http_port, over HTTPS when TLS is on
  container ports and the target ports of the Services that select loomd's
      pods: --port (grpc), --http_port (http), --health_port (health) and
      --metrics_port (metrics)
  NetworkPolicies that select loomd's pods: each port they admit is one the
      container declares

--drain_timeout, --port and --http_port come from the ConfigMap flagfiles the
container reads (--flagfile) or else from loomd's defaults (server/main.cc's
ABSL_FLAG, or docs/api.md §3 before main.cc defines the flag).

    deploy/tools/check_rollout.py      # exit 1 and one line per problem
"""
import sys

import contract
import kustomize_lite

GENERATION_SERVICE = "loom.v1.GenerationService"
MIN_STARTUP_SECONDS = 300
FLAGS = ("drain_timeout", "port", "http_port", "health_port", "metrics_port", "tls_cert_file")


def _flagfile_values(args, pod, objects):
    """Flags set by the --flagfile files, mapped back to ConfigMap keys."""
    config_maps = {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == "ConfigMap"}
    mounts = {}
    container = pod["containers"][0]
    volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        if "configMap" in volume:
            mounts[mount["mountPath"].rstrip("/")] = config_maps.get(volume["configMap"]["name"])
    values = {}
    files = [arg.split("=", 1)[1] for arg in args if arg.startswith("--flagfile=")]
    for path in (p for group in files for p in group.split(",")):
        directory, _, key = path.rpartition("/")
        config_map = mounts.get(directory)
        if config_map is None or key not in config_map.get("data", {}):
            raise ValueError(f"--flagfile {path} is not a key of a mounted ConfigMap")
        for line in config_map["data"][key].splitlines():
            if line.startswith("--") and "=" in line:
                name, value = line[2:].split("=", 1)
                values[name] = value
    for arg in args:
        if arg.startswith("--") and "=" in arg and not arg.startswith("--flagfile="):
            name, value = arg[2:].split("=", 1)
            values[name] = value
    return values


def loomd_deployment(objects):
    """The Deployment whose first container is loomd."""
    return next(obj for obj in objects if obj["kind"] == "Deployment"
                and obj["spec"]["template"]["spec"]["containers"][0]["name"] == "loomd")


def loomd_flags(objects, deployment=None):
    """The flags loomd's arguments and flagfiles set (defaults not included)."""
    pod = (deployment or loomd_deployment(objects))["spec"]["template"]["spec"]
    return _flagfile_values(pod["containers"][0].get("args", []), pod, objects)


def effective_flags(objects, defaults):
    values = dict(defaults)
    values.update(loomd_flags(objects))
    return {
        "drain_timeout": contract.parse_duration(values["drain_timeout"]),
        "port": int(values["port"]),
        "http_port": int(values["http_port"]),
        "health_port": int(values["health_port"]),
        "metrics_port": int(values["metrics_port"]),
        "tls": bool(values["tls_cert_file"]),
    }


def _port_number(port, container):
    if isinstance(port, int):
        return port
    for declared in container.get("ports", []):
        if declared.get("name") == port:
            return declared["containerPort"]
    return None


def _selects(service, labels):
    selector = service["spec"].get("selector", {})
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _probe_window(probe):
    return probe.get("initialDelaySeconds", 0) + probe.get("periodSeconds", 10) * probe.get(
        "failureThreshold", 3)


def check(objects, defaults):
    """Problems of one rendered overlay, given loomd's flag defaults."""
    problems = []
    flags = effective_flags(objects, defaults)
    deployment = loomd_deployment(objects)
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    pod_labels = deployment["spec"]["template"]["metadata"].get("labels", {})

    grace = pod.get("terminationGracePeriodSeconds", 30)
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    if grace <= pre_stop + flags["drain_timeout"]:
        problems.append(f"terminationGracePeriodSeconds {grace} must exceed preStop sleep "
                        f"{pre_stop}s + --drain_timeout {flags['drain_timeout']:g}s")

    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    listening = {"grpc": flags["port"], "http": flags["http_port"]}
    for name, flag in (("health", "health_port"), ("metrics", "metrics_port")):
        if flags[flag]:
            listening[name] = flags[flag]
    for name, port in listening.items():
        if ports.get(name) != port:
            flag = {"grpc": "port", "http": "http_port"}.get(name, f"{name}_port")
            problems.append(f"container port {name} is {ports.get(name)}, --{flag} is {port}")
    probe_port = flags["health_port"] if flags["tls"] and flags["health_port"] else flags["port"]
    if flags["tls"] and not flags["health_port"]:
        problems.append("with TLS on, the gRPC probes need --health_port (plaintext health)")

    for kind in ("startupProbe", "readinessProbe"):
        probe = container.get(kind)
        grpc = (probe or {}).get("grpc")
        if grpc is None:
            problems.append(f"{kind} must be a gRPC health check")
            continue
        if grpc.get("port") != probe_port:
            which = "--health_port" if probe_port != flags["port"] else "--port"
            problems.append(f"{kind} checks port {grpc.get('port')}, {which} is {probe_port}")
        if grpc.get("service") != GENERATION_SERVICE:
            problems.append(f"{kind} must check service {GENERATION_SERVICE}")
    startup = container.get("startupProbe")
    if startup and _probe_window(startup) < MIN_STARTUP_SECONDS:
        problems.append(f"startupProbe allows {_probe_window(startup)}s for the model to load, "
                        f"less than {MIN_STARTUP_SECONDS}s")
    readiness = container.get("readinessProbe")
    if readiness:
        notice = readiness.get("periodSeconds", 10) * readiness.get("failureThreshold", 3)
        if notice >= flags["drain_timeout"]:
            problems.append(f"readinessProbe takes {notice}s to notice a drain, not less than "
                            f"--drain_timeout {flags['drain_timeout']:g}s")

    liveness = container.get("livenessProbe", {}).get("httpGet")
    if liveness is None:
        problems.append("livenessProbe must be an HTTP GET of /healthz")
    else:
        if liveness.get("path") != "/healthz":
            problems.append(f"livenessProbe gets {liveness.get('path')}, not /healthz")
        if _port_number(liveness.get("port"), container) != flags["http_port"]:
            problems.append(f"livenessProbe port {liveness.get('port')} is not "
                            f"--http_port {flags['http_port']}")
        scheme = liveness.get("scheme", "HTTP")
        if scheme != ("HTTPS" if flags["tls"] else "HTTP"):
            problems.append(f"livenessProbe uses {scheme}; the HTTP port speaks "
                            f"{'TLS' if flags['tls'] else 'plaintext'}")

    services = [obj for obj in objects if obj["kind"] == "Service" and _selects(obj, pod_labels)]
    for service in services:
        for port in service["spec"]["ports"]:
            target = _port_number(port.get("targetPort", port["port"]), container)
            expected = listening.get(port.get("name"))
            if target != expected:
                problems.append(f"Service {service['metadata']['name']} port {port.get('name')} "
                                f"targets {target}, loomd listens on {expected}")
            if port.get("name") == "grpc" and port.get("appProtocol") != "grpc":
                problems.append(f"Service {service['metadata']['name']} grpc port needs "
                                "appProtocol grpc")

    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        selector = policy["spec"].get("podSelector", {}).get("matchLabels", {})
        if not all(pod_labels.get(k) == v for k, v in selector.items()):
            continue
        for rule in policy["spec"].get("ingress", []):
            for port in rule.get("ports", []):
                if _port_number(port.get("port"), container) not in set(listening.values()):
                    problems.append(f"NetworkPolicy {policy['metadata']['name']} admits port "
                                    f"{port.get('port')}, where loomd does not listen")

    rolling = deployment["spec"].get("strategy", {}).get("rollingUpdate", {})
    if rolling.get("maxUnavailable", "25%") not in (0, "0", "0%"):
        problems.append("rollingUpdate.maxUnavailable must be 0: a replica serves only once its "
                        "model is loaded")
    return problems


def loomd_defaults():
    values = {}
    sources = {}
    for flag in FLAGS:
        values[flag], sources[flag] = contract.flag_default(flag)
    return values, sources


def main():
    defaults, sources = loomd_defaults()
    problems = []
    for overlay in contract.OVERLAYS:
        objects = kustomize_lite.build(contract.REPO / "deploy" / "k8s" / "overlays" / overlay)
        problems += [f"{overlay}: {p}" for p in check(objects, defaults)]
    for problem in problems:
        print(problem)
    described = ", ".join(f"--{flag}={defaults[flag]} ({sources[flag]})" for flag in FLAGS)
    print(f"check_rollout: defaults {described}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
