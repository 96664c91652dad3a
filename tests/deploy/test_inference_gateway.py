"""The inference-gateway overlay: its pieces name each other and agree with
loomd, and inference_gateway.check notices when one of them drifts."""
import unittest

import yaml

import common
import check_manifests
import inference_gateway

OVERLAY = "inference-gateway"


def epp_config(objects):
    return yaml.safe_load(common.find(objects, "ConfigMap", "loom-epp-config")["data"]["config.yaml"])


def set_epp_config(objects, config):
    common.find(objects, "ConfigMap", "loom-epp-config")["data"]["config.yaml"] = yaml.safe_dump(
        config)


def plugin(config, plugin_type):
    return next(p for p in config["plugins"] if p["type"] == plugin_type)


def loomd_args(objects):
    return common.find(objects, "Deployment", "loom")["spec"]["template"]["spec"]["containers"][
        0]["args"]


def replace_arg(objects, name, value):
    args = loomd_args(objects)
    args[:] = [a for a in args if not a.startswith(f"--{name}=")] + [f"--{name}={value}"]


class InferenceGatewayTest(unittest.TestCase):
    def setUp(self):
        self.objects = common.overlay(OVERLAY)

    def problems(self):
        return inference_gateway.check(self.objects)

    def assertOneProblem(self, text):
        problems = self.problems()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn(text, problems[0])

    def test_overlay_is_consistent(self):
        self.assertEqual(self.problems(), [])
        kinds = {obj["kind"] for obj in self.objects}
        self.assertLessEqual({"InferencePool", "Gateway", "HTTPRoute", "ServiceAccount", "Role",
                              "RoleBinding"}, kinds)
        pod = common.find(self.objects, "Deployment", "loom")["spec"]["template"]
        self.assertEqual(pod["metadata"]["labels"][inference_gateway.ENGINE_LABEL], "loom")

    def test_engine_config_maps_the_model_server_protocol_to_loomd(self):
        entry = plugin(epp_config(self.objects), "core-metrics-extractor")["parameters"][
            "engineConfigs"][0]
        self.assertEqual(entry["name"], "loom")
        self.assertEqual((entry["queuedRequestsSpec"], entry["runningRequestsSpec"],
                          entry["kvUsageSpec"], entry["cacheInfoSpec"]),
                         ("loom_requests_waiting", "loom_requests_running",
                          "loom_kv_cache_usage_ratio", "loom_cache_config_info"))

    def test_pool_must_select_loomd_on_its_http_port(self):
        pool = common.find(self.objects, "InferencePool")["spec"]
        pool["selector"]["matchLabels"]["app.kubernetes.io/component"] = "epp"
        self.assertOneProblem("does not select the loomd pods")
        self.objects = common.overlay(OVERLAY)
        common.find(self.objects, "InferencePool")["spec"]["targetPorts"] = [{"number": 50051}]
        self.assertOneProblem("--http_port 8080")

    def test_endpoint_picker_ref_must_reach_the_ext_proc_port(self):
        common.find(self.objects, "InferencePool")["spec"]["endpointPickerRef"]["port"] = {
            "number": 9003}
        self.assertOneProblem("does not reach the EPP's --grpc-port 9002")
        self.objects = common.overlay(OVERLAY)
        common.find(self.objects, "InferencePool")["spec"]["endpointPickerRef"]["name"] = "epp"
        self.assertOneProblem("names no Service epp")

    def test_route_must_send_to_the_pool(self):
        route = common.find(self.objects, "HTTPRoute")
        route["spec"]["rules"][0]["backendRefs"][0]["name"] = "other"
        problems = self.problems()
        self.assertEqual(len(problems), 2, problems)
        self.assertIn("no HTTPRoute sends to the InferencePool", problems[1])
        self.objects = common.overlay(OVERLAY)
        common.find(self.objects, "HTTPRoute")["spec"]["parentRefs"][0]["name"] = "gw"
        self.assertOneProblem("names no Gateway gw")

    def test_engine_label_and_metric_names(self):
        pod = common.find(self.objects, "Deployment", "loom")["spec"]["template"]
        pod["metadata"]["labels"][inference_gateway.ENGINE_LABEL] = "vllm"
        self.assertOneProblem("no engineConfigs entry for engine type vllm")
        for spec, text in (("loom_requests_total", "is a counter"),
                           ("vllm:num_requests_waiting", "is not a loomd metric")):
            self.objects = common.overlay(OVERLAY)
            config = epp_config(self.objects)
            plugin(config, "core-metrics-extractor")["parameters"]["engineConfigs"][0][
                "queuedRequestsSpec"] = spec
            set_epp_config(self.objects, config)
            self.assertOneProblem(text)

    def test_kv_events_must_reach_the_scorer(self):
        replace_arg(self.objects, "kv_events_endpoint", "tcp://loom-epp:5558")
        self.assertOneProblem("does not reach the scorer's zmqEndpoint port 5557")
        self.objects = common.overlay(OVERLAY)
        replace_arg(self.objects, "kv_events_endpoint", "tcp://*:5557")
        self.assertOneProblem("must connect to tcp://loom-epp:PORT")
        self.objects = common.overlay(OVERLAY)
        replace_arg(self.objects, "kv_events_topic", "events@$(POD_IP)")
        self.assertOneProblem("topicFilter")
        self.objects = common.overlay(OVERLAY)
        replace_arg(self.objects, "block_size", "32")
        self.assertOneProblem("indexer blockSize 16 differs from loomd --block_size 32")
        self.objects = common.overlay(OVERLAY)
        replace_arg(self.objects, "enable_prefix_caching", "false")
        self.assertOneProblem("--enable_prefix_caching=true")

    def test_epp_config_schema_and_references(self):
        config = epp_config(self.objects)
        config["schedulingProfiles"][0]["plugins"][1]["pluginRef"] = "queue-scorr"
        set_epp_config(self.objects, config)
        self.assertOneProblem("pluginRef queue-scorr names no plugin")
        for mutate in (lambda c: c.update(schedulingProfile=[]),
                       lambda c: plugin(c, "precise-prefix-cache-scorer")["parameters"][
                           "kvEventsConfig"].update(zmqEndpoint="tcp://*"),
                       lambda c: plugin(c, "core-metrics-extractor")["parameters"][
                           "engineConfigs"][0].update(kvUsage="loom_kv_cache_usage_ratio")):
            config = epp_config(common.overlay(OVERLAY))
            mutate(config)
            self.assertEqual(len(inference_gateway.check_epp_config(config)), 1)

    def test_crd_kinds_have_schemas(self):
        pool = common.find(self.objects, "InferencePool")
        self.assertEqual(check_manifests.validate(pool), [])
        pool["spec"]["endpointPickerRef"]["failureMode"] = "Fail"
        self.assertEqual(len(check_manifests.validate(pool)), 1)
        route = common.find(self.objects, "HTTPRoute")
        route["spec"]["rules"][0]["matches"][0]["path"]["value"] = "v1"
        self.assertEqual(len(check_manifests.validate(route)), 1)
        gateway = common.find(self.objects, "Gateway")
        del gateway["spec"]["listeners"][0]["port"]
        self.assertEqual(len(check_manifests.validate(gateway)), 1)


if __name__ == "__main__":
    unittest.main()
