"""Schema validation of the rendered objects rejects what the API server would."""
import unittest

import common
import check_manifests


class ValidateTest(unittest.TestCase):
    def test_every_rendered_object_is_valid(self):
        for name in common.OVERLAYS:
            for obj in common.overlay(name):
                with self.subTest(overlay=name, kind=obj["kind"]):
                    self.assertEqual(check_manifests.validate(obj), [])

    def test_unknown_and_mistyped_fields(self):
        objects = common.overlay("gpu")
        common.container(objects)["livenessProbe"]["httpGet"]["paht"] = "/healthz"
        self.assertEqual(len(check_manifests.validate(common.find(objects, "Deployment"))), 1)
        hpa = common.find(common.overlay("cpu"), "HorizontalPodAutoscaler")
        hpa["spec"]["maxReplicas"] = "eight"
        self.assertEqual(len(check_manifests.validate(hpa)), 1)

    def test_crd_kinds_have_schemas(self):
        objects = common.overlay("gpu-keda")
        monitor = common.find(objects, "ServiceMonitor")
        del monitor["spec"]["endpoints"][0]["port"]
        self.assertEqual(len(check_manifests.validate(monitor)), 1)
        scaled = common.find(objects, "ScaledObject")
        scaled["spec"]["triggers"] = []
        self.assertEqual(len(check_manifests.validate(scaled)), 1)

    def test_prometheus_rule_carries_the_rules_file(self):
        objects = common.overlay("gpu")
        self.assertEqual(check_manifests.check_rules_copy(objects), [])
        rule = common.find(objects, "PrometheusRule")
        rule["spec"]["groups"][1]["rules"][0]["for"] = "1m"
        self.assertEqual(len(check_manifests.check_rules_copy(objects)), 1)

    def test_keda_overlay_replaces_the_hpa(self):
        kinds = [obj["kind"] for obj in common.overlay("gpu-keda")]
        self.assertIn("ScaledObject", kinds)
        self.assertNotIn("HorizontalPodAutoscaler", kinds)
        self.assertIn("HorizontalPodAutoscaler", [o["kind"] for o in common.overlay("gpu")])


if __name__ == "__main__":
    unittest.main()
