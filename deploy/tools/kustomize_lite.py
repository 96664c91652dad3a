#!/usr/bin/env python3
"""Renders a kustomization the way `kubectl kustomize` does, for the subset
deploy/k8s uses, on machines without kubectl (Debian's kubernetes-client is
too old for `patches:`).

Supported: resources (files and directories), patches given by path
(strategic merge, including `$patch: delete` of a whole object) and images
(newName, newTag, digest). Anything else in a kustomization.yaml is an error,
so the subset cannot drift silently. tests/deploy compares the output with
kubectl's where kubectl exists.

    deploy/tools/kustomize_lite.py deploy/k8s/overlays/gpu > gpu.yaml
"""
import copy
import pathlib
import sys

import yaml

SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "patches", "images"}

# Strategic-merge keys of the list fields this repo patches (the keys
# Kubernetes declares for them); other lists are replaced whole.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
}


class KustomizeError(Exception):
    pass


def load_documents(path):
    with open(path, encoding="utf-8") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc is not None]


def identity(obj):
    group = obj.get("apiVersion", "").rpartition("/")[0]
    metadata = obj.get("metadata", {})
    return (group, obj.get("kind"), metadata.get("namespace"), metadata.get("name"))


def list_merge_key(field, items):
    if field in MERGE_KEYS:
        return MERGE_KEYS[field]
    if field == "ports" and items:
        # Container ports merge on containerPort, Service ports on port.
        return "containerPort" if "containerPort" in items[0] else "port"
    return None


def merge(base, patch, field=None):
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = dict(base)
        for key, value in patch.items():
            if key.startswith("$"):
                raise KustomizeError(f"unsupported directive {key} inside an object")
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = merge(merged[key], value, key)
            else:
                merged[key] = copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(patch, list):
        key = list_merge_key(field, base + patch)
        if key is None or not all(isinstance(item, dict) and key in item for item in base + patch):
            return copy.deepcopy(patch)
        # Items the patch adds come first, in its order, then the base's
        # (merged where the patch names them), as kustomize orders them.
        merged = list(base)
        added = []
        for item in patch:
            at = next((i for i, old in enumerate(merged) if old[key] == item[key]), None)
            if at is None:
                added.append(copy.deepcopy(item))
            else:
                merged[at] = merge(merged[at], item)
        return added + merged
    return copy.deepcopy(patch)


def apply_patch(objects, patch):
    target = identity(patch)
    matches = [i for i, obj in enumerate(objects) if identity(obj) == target]
    if len(matches) != 1:
        raise KustomizeError(f"patch target {target} matches {len(matches)} objects")
    if patch.get("$patch") == "delete":
        del objects[matches[0]]
    elif "$patch" in patch:
        raise KustomizeError(f"unsupported $patch: {patch['$patch']}")
    else:
        objects[matches[0]] = merge(objects[matches[0]], patch)


def pod_specs(obj):
    spec = obj.get("spec", {})
    if "template" in spec:
        yield spec["template"].get("spec", {})
    elif obj.get("kind") == "Pod":
        yield spec


def apply_image(objects, image):
    for obj in objects:
        for pod in pod_specs(obj):
            for container in pod.get("containers", []) + pod.get("initContainers", []):
                ref = container.get("image", "")
                name = ref.split("@")[0]
                if ":" in name.rsplit("/", 1)[-1]:
                    name = name.rsplit(":", 1)[0]
                if name != image["name"]:
                    continue
                new = image.get("newName", name)
                if "digest" in image:
                    new += "@" + image["digest"]
                elif "newTag" in image:
                    new += ":" + image["newTag"]
                container["image"] = new


def build(directory):
    directory = pathlib.Path(directory)
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    unsupported = set(kustomization) - SUPPORTED_KEYS
    if unsupported:
        raise KustomizeError(f"{directory}: unsupported fields {sorted(unsupported)}")
    objects = []
    for resource in kustomization.get("resources", []):
        path = directory / resource
        objects.extend(build(path) if path.is_dir() else load_documents(path))
    for patch in kustomization.get("patches", []):
        if set(patch) != {"path"}:
            raise KustomizeError(f"{directory}: only patches given by path are supported")
        for document in load_documents(directory / patch["path"]):
            apply_patch(objects, document)
    for image in kustomization.get("images", []):
        apply_image(objects, image)
    return objects


def main(argv):
    if len(argv) != 2:
        sys.exit(f"usage: {argv[0]} KUSTOMIZATION_DIR")
    objects = sorted(build(argv[1]), key=lambda obj: (obj["kind"], obj["metadata"]["name"]))
    yaml.safe_dump_all(objects, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main(sys.argv)
