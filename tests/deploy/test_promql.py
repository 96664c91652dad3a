"""The PromQL check passes the shipped dashboard and rules and rejects names,
labels and values loomd does not export."""
import copy
import json
import shutil
import unittest

import common
import check_promql
import contract
import yaml

METRICS = contract.metrics()


def problems(expr, recorded=()):
    return check_promql.check_expr(expr, "test", METRICS, recorded)


class ExprTest(unittest.TestCase):
    def test_contract_names_pass(self):
        self.assertEqual(problems(
            'sum by (finish_reason) (rate(loom_requests_total{job=~"$job"}[$__rate_interval]))'), [])
        self.assertEqual(problems(
            'histogram_quantile(0.99, sum by (le) (rate(loom_inter_token_latency_seconds_bucket[5m])))'),
            [])
        self.assertEqual(problems('(loom_requests_waiting > 0) and '
                                  '(rate(loom_engine_steps_total[2m]) == 0)'), [])

    def test_unknown_series(self):
        self.assertEqual(len(problems("rate(loom_tokens_total[5m])")), 1)
        # A histogram has no bare series, a gauge has no _bucket.
        self.assertEqual(len(problems("loom_request_duration_seconds")), 1)
        self.assertEqual(len(problems("loom_requests_running_bucket")), 1)

    def test_labels_and_values(self):
        self.assertEqual(len(problems('loom_requests_total{finish_reason="timeout"}')), 1)
        self.assertEqual(len(problems('loom_requests_total{reason="stop"}')), 1)
        self.assertEqual(len(problems('sum by (state) (loom_requests_running)')), 1)
        self.assertEqual(problems('sum by (state) (loom_kv_cache_blocks{state="cached"})'), [])

    def test_recorded_names(self):
        self.assertEqual(len(problems("job:loom_x:rate5m > 1")), 1)
        self.assertEqual(problems("job:loom_x:rate5m > 1", {"job:loom_x:rate5m"}), [])


class DashboardTest(unittest.TestCase):
    def setUp(self):
        path = common.REPO / "deploy" / "grafana" / "loom-dashboard.json"
        self.dashboard = json.loads(path.read_text(encoding="utf-8"))

    def test_shipped_dashboard_passes(self):
        self.assertEqual(check_promql.check_dashboard(self.dashboard, METRICS), [])

    @unittest.skipUnless(shutil.which("promtool"), "promtool (Debian prometheus) not installed")
    def test_promtool_parses_every_query(self):
        self.assertEqual(check_promql.check_dashboard_syntax(self.dashboard), [])
        broken = copy.deepcopy(self.dashboard)
        broken["panels"][1]["targets"][0]["expr"] = "sum(rate(loom_requests_total[5m])"
        self.assertEqual(len(check_promql.check_dashboard_syntax(broken)), 1)

    def test_missing_quantile_and_panel_are_noticed(self):
        for panel in self.dashboard["panels"]:
            panel["targets"] = [t for t in panel.get("targets", [])
                                if "histogram_quantile(0.99" not in t["expr"]
                                and "loom_preemptions_total" not in t["expr"]]
        found = check_promql.check_dashboard(self.dashboard, METRICS)
        self.assertIn("dashboard: nothing shows loom_preemptions_total", found)
        self.assertIn("dashboard: no p99 of loom_time_to_first_token_seconds", found)

    def test_undefined_variable(self):
        self.dashboard["panels"][1]["targets"][0]["expr"] = 'loom_requests_running{pod=~"$pod"}'
        self.assertTrue(any("undefined variable $pod" in p
                            for p in check_promql.check_dashboard(self.dashboard, METRICS)))


class RulesTest(unittest.TestCase):
    def test_shipped_rules_pass(self):
        rules = yaml.safe_load(
            (common.REPO / "deploy" / "prometheus" / "loom.rules.yml").read_text(encoding="utf-8"))
        self.assertEqual(check_promql.check_rules(rules, METRICS, "rules"), [])
        rules["groups"][1]["rules"][0]["expr"] = "loom_queue_seconds > 5"
        self.assertEqual(len(check_promql.check_rules(rules, METRICS, "rules")), 1)


if __name__ == "__main__":
    unittest.main()
