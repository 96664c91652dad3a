"""kustomize_lite renders like kubectl kustomize for what deploy/k8s uses."""
import subprocess
import unittest

import common
import check_manifests
import kustomize_lite
import yaml


class MergeTest(unittest.TestCase):
    def test_containers_merge_by_name_and_maps_deeply(self):
        base = {"spec": {"containers": [
            {"name": "a", "image": "x", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "image": "y"}]}}
        patch = {"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"memory": "1Gi"}}},
            {"name": "c", "image": "z"}]}}
        merged = kustomize_lite.merge(base, patch)
        # What the patch adds comes first, as kubectl kustomize orders it.
        self.assertEqual(merged["spec"]["containers"], [
            {"name": "c", "image": "z"},
            {"name": "a", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "image": "y"}])

    def test_lists_without_merge_key_are_replaced_and_null_deletes(self):
        base = {"tolerations": [{"key": "a"}], "keep": 1, "drop": 2}
        merged = kustomize_lite.merge(base, {"tolerations": [{"key": "b"}], "drop": None})
        self.assertEqual(merged, {"tolerations": [{"key": "b"}], "keep": 1})

    def test_delete_patch_and_images(self):
        objects = [
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
             "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "loom"}]}}}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
        ]
        kustomize_lite.apply_patch(objects, {"$patch": "delete", "apiVersion": "v1",
                                             "kind": "Service", "metadata": {"name": "s"}})
        self.assertEqual(len(objects), 1)
        kustomize_lite.apply_image(objects, {"name": "loom", "newName": "r/loom", "newTag": "1"})
        self.assertEqual(
            objects[0]["spec"]["template"]["spec"]["containers"][0]["image"], "r/loom:1")
        with self.assertRaises(kustomize_lite.KustomizeError):
            kustomize_lite.apply_patch(objects, {"apiVersion": "v1", "kind": "Service",
                                                 "metadata": {"name": "s"}})

    @unittest.skipUnless(check_manifests.kubectl_with_kustomize(), "no kubectl 1.21+ installed")
    def test_overlays_render_like_kubectl(self):
        for name in common.OVERLAYS:
            with self.subTest(overlay=name):
                path = common.REPO / "deploy" / "k8s" / "overlays" / name
                out = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True,
                                     text=True, check=True).stdout
                theirs = {kustomize_lite.identity(o): o for o in yaml.safe_load_all(out) if o}
                ours = {kustomize_lite.identity(o): o for o in common.overlay(name)}
                self.assertEqual(ours, theirs)


if __name__ == "__main__":
    unittest.main()
