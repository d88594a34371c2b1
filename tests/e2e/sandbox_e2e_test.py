#!/usr/bin/env python3
"""End-to-end: real inspection-sandbox and inspection-gateway processes on free ports.

Every RPC is called through an independent Python grpcio client and through grpcurl; a
token is walked through statuses 0..6 with the sandbox's admin API and observed with
GetTokenStatus; a damage detection's webhooks reach an HTTP receiver with the right
x-api-key header, in order, and are retried after injected failures; and both clients
call the gateway over mTLS under an authorization policy (certificates made at test time).

Run by ctest (see CMakeLists.txt) with the venv from scripts/install-deps.sh:
  sandbox_e2e_test.py --gateway BIN --sandbox BIN --grpcurl BIN --proto-dir DIR
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_support import Process, Receiver, field, load_stubs, wait_for  # noqa: E402

ARGS = None
WEBHOOK_KEY = "e2e-webhook-key-5b21"


class SandboxEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        cls.grpc = grpc
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pb = load_stubs(ARGS.proto_dir, cls.tmp.name)
        cls.sandbox = Process([ARGS.sandbox, "--listen=127.0.0.1:0", "--seed=7",
                               "--webhook-delay-ms=20"])
        ready = cls.sandbox.wait_json_line("inspection-sandbox serving")
        cls.sandbox_url = ready["base_url"]
        cls.gateway = Process([ARGS.gateway, f"--upstream-url={cls.sandbox_url}",
                               f"--webapp-url={ready['webapp_url']}",
                               "--grpc-addr=127.0.0.1:0", "--webhook-addr=127.0.0.1:0",
                               # grpcurl below describes the API by reflection, which is
                               # off by default outside --sandbox.
                               "--grpc-reflection=on",
                               "--admin-addr=127.0.0.1:0",
                               f"--event-log=sqlite:{cls.tmp.name}/events.db"],
                              env={"INSPECTION_API_KEY": "sandbox-api-key"})
        cls.target = "127.0.0.1:%d" % cls.gateway.wait_json_line("inspection-gateway serving")["grpc_port"]
        cls.channel = grpc.insecure_channel(cls.target)
        grpc.channel_ready_future(cls.channel).result(timeout=30)
        pb = cls.pb
        cls.tokens = pb["token_grpc"].TokenServiceStub(cls.channel)
        cls.images = pb["image_grpc"].ImageServiceStub(cls.channel)
        cls.damage = pb["damage_grpc"].DamageServiceStub(cls.channel)
        cls.inspections = pb["inspection_grpc"].InspectionServiceStub(cls.channel)
        cls.events = pb["event_config_grpc"].EventConfigServiceStub(cls.channel)
        cls.receiver = Receiver()

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.receiver.stop()
        gateway_exit = cls.gateway.stop()
        sandbox_exit = cls.sandbox.stop()
        cls.tmp.cleanup()
        assert gateway_exit == 0, f"gateway exited {gateway_exit}"
        assert sandbox_exit == 0, f"sandbox exited {sandbox_exit}"

    # ---- helpers ----

    def admin(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.sandbox_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return json.loads(text) if text else None

    def create_token(self, fast_track=True, creator="agent-e2e"):
        pb = self.pb["token"]
        common = self.pb["common"]
        request = pb.CreateTokenRequest(
            options=pb.SelfInspectionOptions(shoot_inspect=True, fast_track=fast_track),
            trade_in=pb.TradeIn(immat="EE-123-TT", sending_type=common.SENDING_TYPE_NONE),
            customer=pb.Customer(email="<EMAIL>", firstname="<FIRST_NAME>",
                                 lastname="<LAST_NAME>", phone="+33612345678",
                                 locale=common.LOCALE_FR),
            creator_user_id=creator, validity=90)
        return self.tokens.CreateToken(request, timeout=10)

    def grpcurl(self, method, payload):
        result = subprocess.run([ARGS.grpcurl, "-plaintext", "-d", json.dumps(payload),
                                 self.target, method],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return json.loads(result.stdout)

    def token_status(self, uid):
        return self.tokens.GetTokenStatus(self.pb["token"].GetTokenStatusRequest(uid=uid),
                                          timeout=10).token

    # ---- tests ----

    def test_token_walks_through_every_status(self):
        common = self.pb["common"]
        created = self.create_token(fast_track=True)
        uid = created.token.uid
        self.assertTrue(uid)
        self.assertTrue(created.customer_url.endswith(f"/fr/services/{uid}"), created.customer_url)
        self.assertEqual(created.device_id, uid + "-pwa")
        self.assertEqual(self.token_status(uid).tradein_status, common.TRADEIN_STATUS_CREATED)
        steps = [("open", common.TRADEIN_STATUS_OPENED),
                 ("start-shooting", common.TRADEIN_STATUS_SHOOTING),
                 ("finish-shooting", common.TRADEIN_STATUS_PICTURES_TAKEN),
                 ("fast-track", common.TRADEIN_STATUS_FAST_TRACK),
                 ("complete", common.TRADEIN_STATUS_COMPLETED),
                 ("chase-up", common.TRADEIN_STATUS_CHASED_UP)]
        raw = 0
        for step, expected in steps:
            self.admin("POST", f"/_sandbox/tokens/{uid}/{step}")
            raw += 1
            token = self.token_status(uid)
            self.assertEqual(token.tradein_status, expected, step)
            self.assertEqual(token.tradein_status_raw, raw, step)
        # The self-inspection exists, is searchable by the agent and has a report.
        token = self.token_status(uid)
        inspection_id = token.inspection_ptr.id
        self.assertTrue(inspection_id)
        found = self.inspections.SearchInspections(
            self.pb["inspection"].SearchInspectionsRequest(username="agent-e2e", limit=50),
            timeout=10)
        self.assertIn(inspection_id, [item.id for item in found.data])
        report = self.inspections.GetDamagesReport(
            self.pb["inspection"].GetDamagesReportRequest(inspection_id=inspection_id), timeout=10)
        self.assertTrue(report.report.struct_value.fields)

    def test_every_rpc_through_grpcio(self):
        pb = self.pb
        created = self.create_token()
        self.assertTrue(created.token.uid)
        status = self.token_status(created.token.uid)
        self.assertEqual(status.uid, created.token.uid)

        url = "https://images.example.com/e2e/front.jpg"
        quality = self.images.AssessQuality(pb["image"].AssessQualityRequest(url=url), timeout=10)
        self.assertEqual(len(quality.data), 1)
        self.assertNotEqual(quality.data[0].classification.image_quality_compliance, 0)
        batch = self.images.AssessQualityBatch(
            pb["image"].AssessQualityBatchRequest(urls=[url, url + "?b", url + "?corrupted"]),
            timeout=10)
        self.assertEqual([item.url for item in batch.data], [url, url + "?b", url + "?corrupted"])
        self.assertEqual(batch.data[2].status, 400)  # per-image status, not an RPC error
        seg = self.images.SegmentVehicle(pb["image"].SegmentVehicleRequest(urls=[url]), timeout=10)
        self.assertTrue(seg.data.detection_list[0].detections.car_data.contour[0].points)
        parts = self.images.SegmentParts(pb["image"].SegmentPartsRequest(urls=[url]), timeout=10)
        first = parts.data.detection_list[0].detections.parts_data[0]
        self.assertTrue(first.type)
        self.assertEqual(first.part.code, first.type)
        png = self.images.RemoveBackground(pb["image"].RemoveBackgroundRequest(url=url), timeout=10)
        self.assertTrue(png.path.endswith(".png"), png.path)
        jpg = self.images.RemoveBackground(
            pb["image"].RemoveBackgroundRequest(url=url, color_background="#FFFFFF"), timeout=10)
        self.assertTrue(jpg.path.endswith(".jpg"), jpg.path)

        detected = self.damage.DetectDamage(pb["damage"].DetectDamageRequest(urls=[url]),
                                            timeout=10)
        self.assertTrue(detected.inspection_id)
        report = self.inspections.GetDamagesReport(
            pb["inspection"].GetDamagesReportRequest(inspection_id=detected.inspection_id),
            timeout=10)
        self.assertTrue(report.report.struct_value.fields)
        search = self.inspections.SearchInspections(
            pb["inspection"].SearchInspectionsRequest(username="agent-e2e", page=1, limit=5),
            timeout=10)
        self.assertEqual(search.pagination_info.current_page, 1)

        events = pb["event_config"]
        self.events.UpdateWebhookConfig(events.UpdateWebhookConfigRequest(
            webhook_url_v2=self.receiver.url, webhook_header_key=WEBHOOK_KEY), timeout=10)
        config = self.events.GetWebhookConfig(events.GetWebhookConfigRequest(), timeout=10)
        self.assertEqual(config.config.webhook_url_v2, self.receiver.url)
        listed = self.events.ListEventConfigs(events.ListEventConfigsRequest(), timeout=10)
        self.assertEqual(len(listed.event_configs), 8)
        updated = self.events.UpdateEventConfig(events.UpdateEventConfigRequest(
            event_name=self.pb["common"].EVENT_NAME_SHARE_UPDATED_REPORT, webhook=True),
            timeout=10)
        self.assertTrue(updated.config.webhook)
        sent = self.events.TestWebhook(events.TestWebhookRequest(
            event_name=self.pb["common"].EVENT_NAME_SHARE_UPDATED_REPORT), timeout=10)
        self.assertEqual(sent.status, "send")
        wait_for(lambda: "shareUpdatedReport" in self.receiver.events(), 20, "the test webhook")

    def test_every_rpc_through_grpcurl(self):
        url = "https://images.example.com/e2e/grpcurl.jpg"
        created = self.grpcurl("inspection.v1.TokenService/CreateToken", {
            "options": {"shoot_inspect": True, "fast_track": False},
            "trade_in": {"sending_type": "SENDING_TYPE_NONE"},
            "customer": {"email": "<EMAIL>", "firstname": "<FIRST_NAME>",
                         "lastname": "<LAST_NAME>", "phone": "<PHONE>", "locale": "LOCALE_EN"},
            "validity": 30})
        uid = created["token"]["uid"]
        self.assertEqual(self.grpcurl("inspection.v1.TokenService/GetTokenStatus",
                                      {"uid": uid})["token"]["uid"], uid)
        self.assertIn("data", self.grpcurl("inspection.v1.ImageService/AssessQuality",
                                           {"url": url}))
        self.assertIn("data", self.grpcurl("inspection.v1.ImageService/AssessQualityBatch",
                                           {"urls": [url]}))
        self.assertIn("data", self.grpcurl("inspection.v1.ImageService/SegmentVehicle",
                                           {"urls": [url]}))
        self.assertIn("data", self.grpcurl("inspection.v1.ImageService/SegmentParts",
                                           {"urls": [url]}))
        self.assertIn("path", self.grpcurl("inspection.v1.ImageService/RemoveBackground",
                                           {"url": url}))
        detected = self.grpcurl("inspection.v1.DamageService/DetectDamage", {"urls": [url]})
        inspection_id = field(detected, "inspection_id")
        self.assertIn("report", self.grpcurl("inspection.v1.InspectionService/GetDamagesReport",
                                             {"inspection_id": inspection_id}))
        self.assertIsInstance(field(self.grpcurl(
            "inspection.v1.InspectionService/SearchInspections", {"username": "nobody"}),
            "pagination_info"), dict)
        self.grpcurl("inspection.v1.EventConfigService/UpdateWebhookConfig",
                     {"webhook_url_v2": self.receiver.url, "webhook_header_key": WEBHOOK_KEY})
        self.assertEqual(field(self.grpcurl("inspection.v1.EventConfigService/GetWebhookConfig",
                                            {})["config"], "webhook_url_v2"), self.receiver.url)
        self.assertEqual(len(field(self.grpcurl("inspection.v1.EventConfigService/ListEventConfigs",
                                                {}), "event_configs")), 8)
        self.assertTrue(self.grpcurl("inspection.v1.EventConfigService/UpdateEventConfig",
                                     {"event_name": "EVENT_NAME_DELETE_INSPECTION",
                                      "webhook": True})["config"]["webhook"])
        self.assertEqual(self.grpcurl("inspection.v1.EventConfigService/TestWebhook",
                                      {"event_name": "EVENT_NAME_DELETE_INSPECTION"})["status"],
                         "send")

    def test_damage_webhooks_arrive_in_order_and_are_retried(self):
        pb = self.pb
        events = pb["event_config"]
        common = pb["common"]
        self.events.UpdateWebhookConfig(events.UpdateWebhookConfigRequest(
            webhook_url_v2=self.receiver.url, webhook_header_key=WEBHOOK_KEY), timeout=10)
        for name in (common.EVENT_NAME_NEW_INSPECTION, common.EVENT_NAME_DETECTION_FINISHED,
                     common.EVENT_NAME_CREATE_REPORT):
            self.events.UpdateEventConfig(events.UpdateEventConfigRequest(event_name=name,
                                                                          webhook=True),
                                          timeout=10)
        # createReport: the first two delivery attempts fail (injected in the sandbox).
        self.admin("POST", "/_sandbox/faults", {"webhook": True, "event": "createReport",
                                                 "kind": "fail_first", "count": 2, "times": 1})
        detected = self.damage.DetectDamage(
            pb["damage"].DetectDamageRequest(urls=["https://images.example.com/e2e/hook.jpg"]),
            timeout=10)
        inspection_id = detected.inspection_id

        def mine():
            with self.receiver.lock:
                return [d for d in self.receiver.deliveries
                        if isinstance(d["body"], dict) and
                        d["body"].get("inspectionId") == inspection_id]
        got = wait_for(lambda: len(mine()) >= 3 and mine(), 60, "three damage webhooks")
        self.assertEqual([d["body"]["event"] for d in got[:3]],
                         ["newInspection", "detectionFinished", "createReport"])
        for delivery in got:
            self.assertEqual(delivery["x-api-key"], WEBHOOK_KEY)
            self.assertEqual(delivery["content-type"], "application/json")
        report = got[2]["body"]
        self.assertEqual(report["message"], "Report OK")
        self.assertIsInstance(report["dataAPI"]["data"]["damages"], dict)
        log = self.admin("GET", "/_sandbox/webhooks/deliveries")
        records = log["deliveries"] if isinstance(log, dict) else log
        attempts = [r for r in records if r["event_name"] == "createReport" and
                    r["outcome"] == "injected_failure"]
        self.assertGreaterEqual(len(attempts), 2, records)


def make_pki(directory):
    """A throwaway CA, a server certificate for 127.0.0.1 and two client certificates
    (SPIFFE IDs), made with the openssl CLI; returns the file paths."""
    def run(*argv):
        subprocess.run(["openssl", *argv], check=True, capture_output=True, timeout=60)

    def path(name):
        return os.path.join(directory, name)

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=e2e CA")
    for name, san in (("server", "DNS:localhost,IP:127.0.0.1"),
                      ("reader", "URI:spiffe://e2e/reader"),
                      ("writer", "URI:spiffe://e2e/writer")):
        with open(path(name + ".ext"), "w") as ext:
            ext.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n")
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", path(name + ".key"), "-out", path(name + ".csr"), "-subj", "/CN=" + name)
        run("x509", "-req", "-in", path(name + ".csr"), "-CA", path("ca.pem"), "-CAkey",
            path("ca.key"), "-CAcreateserial", "-out", path(name + ".pem"), "-days", "2",
            "-extfile", path(name + ".ext"))
    return path


class MtlsEndToEnd(unittest.TestCase):
    """The gateway over mTLS with an authorization policy, called from Python grpcio and
    from grpcurl: who may call what is decided by the client certificate."""

    def test_grpcio_and_grpcurl_over_mtls_with_a_policy(self):
        import grpc
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        path = make_pki(tmp.name)
        with open(path("policy.json"), "w") as policy:
            json.dump({"name": "e2e",
                       "deny_rules": [{"name": "reader-reads",
                                       "source": {"principals": ["spiffe://e2e/reader"]},
                                       "request": {"paths": ["/inspection.v1.EventConfigService/Update*"]}}],
                       "allow_rules": [{"name": "known-callers",
                                        "source": {"principals": ["spiffe://e2e/*"]}}]}, policy)
        sandbox = Process([ARGS.sandbox, "--listen=127.0.0.1:0"])
        self.addCleanup(sandbox.stop)
        ready = sandbox.wait_json_line("inspection-sandbox serving")
        gateway = Process([ARGS.gateway, f"--upstream-url={ready['base_url']}",
                           f"--webapp-url={ready['webapp_url']}", "--grpc-addr=127.0.0.1:0",
                           "--admin-addr=127.0.0.1:0", "--grpc-reflection=on",
                           f"--grpc-tls-cert-file={path('server.pem')}",
                           f"--grpc-tls-key-file={path('server.key')}",
                           f"--grpc-tls-client-ca-file={path('ca.pem')}",
                           f"--grpc-authz-policy-file={path('policy.json')}",
                           f"--event-log=sqlite:{tmp.name}/events.db"],
                          env={"INSPECTION_API_KEY": "sandbox-api-key"})
        self.addCleanup(gateway.stop)
        target = "127.0.0.1:%d" % gateway.wait_json_line("inspection-gateway serving")["grpc_port"]
        pb = load_stubs(ARGS.proto_dir, tmp.name)

        def read(name):
            with open(path(name), "rb") as f:
                return f.read()

        def channel(client):
            credentials = grpc.ssl_channel_credentials(
                root_certificates=read("ca.pem"), private_key=read(client + ".key"),
                certificate_chain=read(client + ".pem"))
            return grpc.secure_channel(target, credentials,
                                       options=[("grpc.ssl_target_name_override", "localhost")])

        reader = pb["event_config_grpc"].EventConfigServiceStub(channel("reader"))
        writer = pb["event_config_grpc"].EventConfigServiceStub(channel("writer"))
        config = reader.GetWebhookConfig(pb["event_config"].GetWebhookConfigRequest(), timeout=10)
        self.assertFalse(config.config.webhook_header_key_set)
        update = pb["event_config"].UpdateWebhookConfigRequest(
            webhook_url_v2="https://hooks.example.test/v2", webhook_header_key="e2e-key")
        with self.assertRaises(grpc.RpcError) as denied:
            reader.UpdateWebhookConfig(update, timeout=10)
        self.assertEqual(denied.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        updated = writer.UpdateWebhookConfig(update, timeout=10)
        self.assertTrue(updated.config.webhook_header_key_set)
        self.assertEqual(len(updated.config.webhook_header_key_sha256_prefix), 12)
        # Plaintext and certificate-less clients do not get in.
        with self.assertRaises(grpc.RpcError) as plaintext:
            pb["event_config_grpc"].EventConfigServiceStub(grpc.insecure_channel(target)) \
                .GetWebhookConfig(pb["event_config"].GetWebhookConfigRequest(), timeout=5)
        self.assertEqual(plaintext.exception.code(), grpc.StatusCode.UNAVAILABLE)
        # grpcurl with the writer's certificate, through reflection.
        result = subprocess.run(
            [ARGS.grpcurl, "-cacert", path("ca.pem"), "-cert", path("writer.pem"), "-key",
             path("writer.key"), "-authority", "localhost", "-d", "{}", target,
             "inspection.v1.EventConfigService/GetWebhookConfig"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(field(json.loads(result.stdout)["config"], "webhook_header_key_set"))
        self.assertNotIn("e2e-key", result.stdout)
        self.assertEqual(gateway.stop(), 0, "\n".join(gateway.lines[-20:]))


class MakeRunCommands(unittest.TestCase):
    """`make run` is `inspection-gateway --sandbox`: the commands it prints must work as
    printed."""

    def test_printed_commands_work(self):
        import shlex
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        gateway = Process([ARGS.gateway, "--sandbox", "--grpc-addr=127.0.0.1:0",
                           "--webhook-addr=127.0.0.1:0", "--admin-addr=127.0.0.1:0",
                           f"--event-log=sqlite:{tmp.name}/events.db"],
                          env={"GRPCURL": ARGS.grpcurl, "INSPECTION_API_KEY": ""})
        try:
            with gateway.cond:
                gateway.cond.wait_for(
                    lambda: any("Play the customer" in l for l in gateway.lines) or
                    gateway.proc.poll() is not None, 60)
                lines = list(gateway.lines)
            commands = [l for l in lines if l.startswith(ARGS.grpcurl + " ")]
            self.assertEqual(len(commands), 4, "\n".join(lines))
            outputs = []
            for command in commands:
                result = subprocess.run(shlex.split(command), capture_output=True, text=True,
                                        timeout=60)
                self.assertEqual(result.returncode, 0, command + "\n" + result.stderr)
                outputs.append(json.loads(result.stdout))
            self.assertIn("/services/", field(outputs[0], "customer_url"))
            self.assertTrue(field(outputs[2], "inspection_id"))
            found = [item["id"] for item in outputs[3].get("data", [])]
            self.assertIn(field(outputs[2], "inspection_id"), found,
                          "the printed search finds the printed damage detection")
        finally:
            self.assertEqual(gateway.stop(), 0, "\n".join(gateway.lines[-20:]))


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--sandbox", required=True)
    parser.add_argument("--grpcurl", required=True)
    parser.add_argument("--proto-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
