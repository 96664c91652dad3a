"""Makes deploy/tools importable and loads the repository's overlays."""
import copy
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "deploy" / "tools"))

import contract  # noqa: E402  (needs the path above)
import kustomize_lite  # noqa: E402

OVERLAYS = contract.OVERLAYS


def overlay(name):
    return kustomize_lite.build(REPO / "deploy" / "k8s" / "overlays" / name)


def find(objects, kind, name=None):
    return next(obj for obj in objects
                if obj["kind"] == kind and (name is None or obj["metadata"]["name"] == name))


def container(objects):
    return find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def clone(objects):
    return copy.deepcopy(objects)
