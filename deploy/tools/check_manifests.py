#!/usr/bin/env python3
"""Renders every overlay of deploy/k8s and validates each object offline:
built-in kinds against the Kubernetes JSON schemas of a pinned version
(PyPI kubernetes-validate, strict: unknown fields are errors), and the CRD
kinds the schemas do not know (ServiceMonitor, PrometheusRule, ScaledObject,
Certificate,
and InferencePool, Gateway and HTTPRoute from inference_gateway.py) against
small schemas of the fields these manifests use. An overlay with an
InferencePool also gets inference_gateway.check: its EPP configuration and
the names its pieces use for each other.
Rendering uses `kubectl kustomize` where kubectl 1.21+ exists and then checks
that deploy/tools/kustomize_lite.py renders the same objects; without kubectl
it uses kustomize_lite alone. The PrometheusRule must carry exactly the
groups of deploy/prometheus/loom.rules.yml.

    deploy/tools/check_manifests.py [--out DIR]   # DIR gets OVERLAY.yaml each
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys

import jsonschema
import kubernetes_validate
import yaml

import contract
import inference_gateway
import kustomize_lite

KUBERNETES_VERSION = "1.32.0"
OVERLAYS = contract.OVERLAYS

_STRING = {"type": "string"}
_LABELS = {"type": "object", "additionalProperties": _STRING}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": _STRING, "namespace": _STRING, "labels": _LABELS},
}
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object",
        "required": ["spec"],
        "properties": {"spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "properties": {"matchLabels": _LABELS}},
                "endpoints": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["port"], "additionalProperties": False,
                    "properties": {"port": _STRING, "path": _STRING, "interval": _STRING,
                                   "scrapeTimeout": _STRING}}},
            }}},
    },
    ("monitoring.coreos.com/v1", "PrometheusRule"): {
        "type": "object",
        "required": ["spec"],
        "properties": {"spec": {
            "type": "object", "required": ["groups"], "additionalProperties": False,
            "properties": {"groups": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["name", "rules"], "additionalProperties": False,
                "properties": {"name": _STRING, "rules": {"type": "array", "items": {
                    "type": "object", "required": ["expr"], "additionalProperties": False,
                    "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
                    "properties": {"record": _STRING, "alert": _STRING, "expr": _STRING,
                                   "for": _STRING, "labels": _LABELS,
                                   "annotations": _LABELS}}}}}}}}},
    },
    ("cert-manager.io/v1", "Certificate"): {
        "type": "object",
        "required": ["spec"],
        "properties": {"spec": {
            "type": "object", "required": ["secretName", "issuerRef", "dnsNames"],
            "additionalProperties": False,
            "properties": {
                "secretName": _STRING, "duration": _STRING, "renewBefore": _STRING,
                "commonName": _STRING,
                "dnsNames": {"type": "array", "minItems": 1, "items": _STRING},
                "privateKey": {"type": "object", "additionalProperties": False, "properties": {
                    "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                    "size": {"type": "integer"},
                    "rotationPolicy": {"enum": ["Never", "Always"]}}},
                "issuerRef": {"type": "object", "required": ["name"], "additionalProperties": False,
                              "properties": {"name": _STRING, "group": _STRING,
                                             "kind": {"enum": ["Issuer", "ClusterIssuer"]}}},
            }}},
    },
    ("keda.sh/v1alpha1", "ScaledObject"): {
        "type": "object",
        "required": ["spec"],
        "properties": {"spec": {
            "type": "object", "required": ["scaleTargetRef", "triggers"],
            "additionalProperties": False,
            "properties": {
                "scaleTargetRef": {"type": "object", "required": ["name"],
                                   "properties": {"name": _STRING}},
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "pollingInterval": {"type": "integer"},
                "cooldownPeriod": {"type": "integer"},
                "triggers": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["type", "metadata"],
                    "properties": {"type": _STRING, "metadata": _LABELS}}},
            }}},
    },
}
CRD_SCHEMAS.update({key: {"type": "object", "required": ["spec"], "properties": {"spec": spec}}
                    for key, spec in inference_gateway.CRD_SPECS.items()})
for _schema in CRD_SCHEMAS.values():
    _schema["properties"]["metadata"] = _METADATA
    _schema["required"].append("metadata")


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (flag files, the EPP config) as literal blocks."""


_BlockDumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def kubectl_with_kustomize():
    """Whether a kubectl with `patches:` support (1.21+, kustomize v4+) is on PATH."""
    if not shutil.which("kubectl"):
        return False
    result = subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True,
                            text=True, check=False)
    try:
        version = json.loads(result.stdout)["clientVersion"]
        return (int(version["major"]), int(version["minor"].rstrip("+"))) >= (1, 21)
    except (ValueError, KeyError):
        return False


def render(overlay_dir):
    """The overlay's objects; problems if kubectl and kustomize_lite disagree."""
    lite = kustomize_lite.build(overlay_dir)
    if not kubectl_with_kustomize():
        return lite, []
    result = subprocess.run(["kubectl", "kustomize", str(overlay_dir)], capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        return lite, [f"{overlay_dir}: kubectl kustomize failed: {result.stderr.strip()}"]
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    ours = {kustomize_lite.identity(obj): obj for obj in lite}
    theirs = {kustomize_lite.identity(obj): obj for obj in objects}
    problems = [f"{overlay_dir}: kustomize_lite renders {key} differently from kubectl"
                for key in sorted(set(ours) | set(theirs), key=str)
                if ours.get(key) != theirs.get(key)]
    return objects, problems


def validate(obj):
    """Schema problems of one object."""
    where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    schema = CRD_SCHEMAS.get((obj.get("apiVersion"), obj.get("kind")))
    if schema is not None:
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=str)
        return [f"{where}: {'.'.join(map(str, e.path))}: {e.message}" for e in errors]
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        path = ".".join(map(str, error.path))
        return [f"{where}: {path}: {error.message}"]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"{where}: no schema for {obj.get('apiVersion')} {obj.get('kind')}"]
    return []


def check_rules_copy(objects):
    rules = yaml.safe_load(
        (contract.REPO / "deploy" / "prometheus" / "loom.rules.yml").read_text(encoding="utf-8"))
    carried = [obj for obj in objects if obj.get("kind") == "PrometheusRule"]
    if len(carried) != 1:
        return [f"expected one PrometheusRule, found {len(carried)}"]
    if carried[0]["spec"] != rules:
        return ["PrometheusRule spec differs from deploy/prometheus/loom.rules.yml"]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, help="write the rendered overlays here")
    args = parser.parse_args()
    problems = []
    count = 0
    for overlay in OVERLAYS:
        objects, render_problems = render(contract.REPO / "deploy" / "k8s" / "overlays" / overlay)
        problems += [f"{overlay}: {p}" for p in render_problems]
        for obj in objects:
            problems += [f"{overlay}: {p}" for p in validate(obj)]
        problems += [f"{overlay}: {p}" for p in check_rules_copy(objects)]
        if any(obj.get("kind") == "InferencePool" for obj in objects):
            problems += [f"{overlay}: {p}" for p in inference_gateway.check(objects)]
        count += len(objects)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            with open(args.out / f"{overlay}.yaml", "w", encoding="utf-8") as stream:
                stream.write("---\n")
                yaml.dump_all(objects, stream, Dumper=_BlockDumper, sort_keys=False, width=88)
    for problem in problems:
        print(problem)
    renderer = "kubectl kustomize + kustomize_lite" if kubectl_with_kustomize() else "kustomize_lite"
    print(f"check_manifests: {count} objects in {len(OVERLAYS)} overlays ({renderer}, "
          f"Kubernetes {KUBERNETES_VERSION}): {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
