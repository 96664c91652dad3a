"""The probes, grace period and drain timeout agree, and the check notices
each way they can stop agreeing."""
import unittest

import common
import check_rollout
import contract

DEFAULTS = {"drain_timeout": "30s", "port": "50051", "http_port": "8080", "health_port": "0",
            "metrics_port": "0", "tls_cert_file": ""}


class RolloutTest(unittest.TestCase):
    def test_every_overlay_agrees_with_loomd_defaults(self):
        defaults, _ = check_rollout.loomd_defaults()
        for name in common.OVERLAYS:
            with self.subTest(overlay=name):
                self.assertEqual(check_rollout.check(common.overlay(name), defaults), [])

    def test_tls_moves_the_probes_to_the_health_port(self):
        objects = common.overlay("gpu-secure")
        container = common.container(objects)
        container["readinessProbe"]["grpc"]["port"] = 50051
        container["livenessProbe"]["httpGet"]["scheme"] = "HTTP"
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertEqual(len(problems), 2, problems)
        self.assertIn("readinessProbe checks port 50051, --health_port is 8081", problems[0])
        self.assertIn("livenessProbe uses HTTP; the HTTP port speaks TLS", problems[1])
        objects = common.overlay("gpu-secure")
        flags = common.find(objects, "ConfigMap", "loom-flags")["data"]
        flags["security.flags"] = flags["security.flags"].replace("--health_port=8081\n", "")
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertTrue(any("need --health_port" in p for p in problems), problems)

    def test_network_policy_admits_only_ports_loomd_serves(self):
        objects = common.overlay("gpu-secure")
        self.assertEqual(check_rollout.check(objects, DEFAULTS), [])
        policy = common.find(objects, "NetworkPolicy")
        policy["spec"]["ingress"][1]["ports"][0]["port"] = 9091
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("admits port 9091", problems[0])

    def test_grace_period_must_outlast_prestop_and_drain(self):
        objects = common.overlay("gpu")
        pod = common.find(objects, "Deployment")["spec"]["template"]["spec"]
        pod["terminationGracePeriodSeconds"] = 35  # 5 s preStop + 30 s drain leaves nothing
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertEqual(len(problems), 1)
        self.assertIn("terminationGracePeriodSeconds 35", problems[0])

    def test_drain_timeout_from_the_flagfile_counts(self):
        objects = common.overlay("cpu")
        flags = common.find(objects, "ConfigMap", "loom-flags")["data"]
        flags["device.flags"] += "--drain_timeout=2m\n"
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertTrue(any("--drain_timeout 120s" in p for p in problems), problems)

    def test_a_longer_default_drain_timeout_is_noticed(self):
        objects = common.overlay("gpu")
        common.find(objects, "ConfigMap", "loom-flags")["data"]["common.flags"] = (
            "--model=/models/model.gguf\n")
        self.assertEqual(check_rollout.check(objects, DEFAULTS), [])
        problems = check_rollout.check(objects, dict(DEFAULTS, drain_timeout="1m"))
        self.assertTrue(any("terminationGracePeriodSeconds" in p for p in problems), problems)

    def test_readiness_must_check_the_generation_service(self):
        objects = common.overlay("gpu")
        del common.container(objects)["readinessProbe"]["grpc"]["service"]
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertEqual(problems, ["readinessProbe must check service loom.v1.GenerationService"])

    def test_startup_probe_leaves_room_for_model_load(self):
        objects = common.overlay("gpu")
        common.container(objects)["startupProbe"]["failureThreshold"] = 6
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertTrue(any("startupProbe allows 30s" in p for p in problems), problems)

    def test_liveness_is_healthz_on_the_http_port(self):
        objects = common.overlay("cpu")
        common.container(objects)["livenessProbe"]["httpGet"]["path"] = "/readyz"
        self.assertIn("livenessProbe gets /readyz, not /healthz",
                      check_rollout.check(objects, DEFAULTS))
        objects = common.overlay("cpu")
        common.find(objects, "ConfigMap", "loom-flags")["data"]["device.flags"] += (
            "--http_port=9090\n")
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertTrue(any("livenessProbe port http is not --http_port 9090" in p
                            for p in problems), problems)

    def test_probes_follow_the_grpc_port(self):
        objects = common.overlay("gpu")
        common.find(objects, "ConfigMap", "loom-flags")["data"]["common.flags"] += "--port=6000\n"
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertTrue(any("startupProbe checks port 50051" in p for p in problems), problems)
        self.assertTrue(any("readinessProbe checks port 50051" in p for p in problems), problems)

    def test_readiness_notices_a_drain_before_it_ends(self):
        objects = common.overlay("gpu")
        common.container(objects)["readinessProbe"]["periodSeconds"] = 20
        problems = check_rollout.check(objects, DEFAULTS)
        self.assertTrue(any("takes 40s to notice a drain" in p for p in problems), problems)


class FlagDefaultTest(unittest.TestCase):
    def test_reads_absl_flag_defaults(self):
        source = '''
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(45),
          "on SIGTERM: finish in-flight requests up to this long");
ABSL_FLAG(int32_t, port, 50051, "gRPC port");
ABSL_FLAG(absl::Duration, other, absl::Minutes(2), "x");
'''
        self.assertEqual(contract._main_cc_default(source, "drain_timeout"), "45s")
        self.assertEqual(contract._main_cc_default(source, "port"), "50051")
        self.assertEqual(contract._main_cc_default(source, "other"), "120s")
        self.assertIsNone(contract._main_cc_default(source, "http_port"))

    def test_reads_the_api_flag_table(self):
        text = (common.REPO / "docs" / "api.md").read_text(encoding="utf-8")
        self.assertEqual(contract._api_md_default(text, "drain_timeout"), "30s")
        self.assertEqual(contract._api_md_default(text, "http_port"), "8080")
        self.assertEqual(contract._api_md_default(text, "port"), "50051")

    def test_durations(self):
        self.assertEqual(contract.parse_duration("30s"), 30)
        self.assertEqual(contract.parse_duration("1m30s"), 90)
        self.assertEqual(contract.parse_duration("500ms"), 0.5)
        with self.assertRaises(ValueError):
            contract.parse_duration("30")


if __name__ == "__main__":
    unittest.main()
