#!/usr/bin/env python3
"""End-to-end for webhooks -> event log -> gRPC streams, with real processes.

- Crash safety: kill -9 a gateway after it acknowledged webhooks, restart it on the same
  SQLite log, resume from the last cursor the client saw: every event exactly once, in
  order.
- Replicas: two gateways on one Redis (a redis-server this test starts); webhooks posted
  to one reach subscribers on the other; one replica killed mid-stream, the client
  resumes on the other: every event exactly once, in order.

- The whole flow: inspection-sandbox's damage detection -> its webhooks -> the gateway's
  receiver -> a Subscribe client (typed createReport) and StreamDamageResults (ends after
  createReport).

Run by ctest: streams_e2e_test.py --gateway BIN --sandbox BIN --proto-dir DIR
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_support import Process, load_stubs, wait_for  # noqa: E402

ARGS = None
WEBHOOK_KEY = "streams-e2e-key"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """An inspection-gateway process with its webhook receiver, on free ports."""

    def __init__(self, event_log, upstream="http://127.0.0.1:9", api_key="unused-key"):
        self.process = Process([ARGS.gateway, f"--upstream-url={upstream}",
                                "--webapp-url=https://webapp.example.test",
                                "--grpc-addr=127.0.0.1:0", "--webhook-addr=127.0.0.1:0",
                                "--admin-addr=127.0.0.1:0", f"--event-log={event_log}"],
                               env={"INSPECTION_API_KEY": api_key,
                                    "INSPECTION_WEBHOOK_KEY": WEBHOOK_KEY})
        ready = self.process.wait_json_line("inspection-gateway serving")
        self.grpc = "127.0.0.1:%d" % ready["grpc_port"]
        self.webhook = ready["webhook_port"]

    def post(self, body):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.webhook}/webhooks/v2", data=json.dumps(body).encode(),
            method="POST", headers={"Content-Type": "application/json", "x-api-key": WEBHOOK_KEY})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status

    def kill9(self):
        self.process.proc.kill()  # SIGKILL: no drain, no goodbye
        self.process.stop()  # reaps it and closes its output

    def stop(self):
        return self.process.stop()


class Subscription:
    """A Subscribe stream read on a thread into a list of (cursor, n)."""

    def __init__(self, pb, target, **request):
        import grpc
        self.channel = grpc.insecure_channel(target)
        stub = pb["event_grpc"].EventServiceStub(self.channel)
        self.call = stub.Subscribe(pb["event"].SubscribeRequest(**request), timeout=120)
        self.events = []
        self.error = None
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for response in self.call:
                n = int(response.event.payload.struct_value.fields["n"].number_value)
                with self.lock:
                    self.events.append((response.event.cursor, n))
        except Exception as error:  # the stream ended (cancel, kill, deadline)
            with self.lock:
                self.error = error

    def count(self):
        with self.lock:
            return len(self.events)

    def close(self):
        self.call.cancel()
        self.thread.join(timeout=10)
        self.channel.close()


def event(n):
    return {"event": "detectionFinished", "inspectionId": f"insp-{n}", "tokenId": "",
            "vehicleId": "veh", "n": n}


class StreamsEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pb = load_stubs(ARGS.proto_dir, cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assert_exactly_once_in_order(self, received, total):
        numbers = [n for _, n in received]
        self.assertEqual(numbers, list(range(total)))
        cursors = [c for c, _ in received]
        self.assertEqual(len(set(cursors)), len(cursors))

    def test_kill_9_then_resume_from_the_last_cursor(self):
        log = f"sqlite:{self.tmp.name}/crash.db"
        first = Gateway(log)
        stream = Subscription(self.pb, first.grpc, from_start=True)
        total = 40
        for n in range(total):
            self.assertEqual(first.post(event(n)), 200)  # acknowledged = stored
        wait_for(lambda: stream.count() >= 15, 30, "the first events on the stream")
        first.kill9()
        stream.thread.join(timeout=30)
        seen = list(stream.events)
        stream.channel.close()
        self.assertTrue(seen)

        second = Gateway(log)
        try:
            resumed = Subscription(self.pb, second.grpc, after_cursor=seen[-1][0])
            wait_for(lambda: len(seen) + resumed.count() >= total, 30, "the rest after restart")
            self.assert_exactly_once_in_order(seen + resumed.events, total)
            resumed.close()
        finally:
            self.assertEqual(second.stop(), 0)

    def test_sandbox_webhooks_reach_a_subscriber_and_stream_damage_results_ends(self):
        sandbox = Process([ARGS.sandbox, "--listen=127.0.0.1:0", "--webhook-delay-ms=20"])
        try:
            base = sandbox.wait_json_line("inspection-sandbox serving")["base_url"]
            gateway = Gateway(f"sqlite:{self.tmp.name}/flow.db", upstream=base,
                              api_key="sandbox-api-key")
            try:
                import grpc
                pb = self.pb
                channel = grpc.insecure_channel(gateway.grpc)
                events = pb["event_config_grpc"].EventConfigServiceStub(channel)
                # Point the vendor (the sandbox) at our receiver, through our own RPCs.
                events.UpdateWebhookConfig(pb["event_config"].UpdateWebhookConfigRequest(
                    webhook_url_v2=f"http://127.0.0.1:{gateway.webhook}/webhooks/v2",
                    webhook_header_key=WEBHOOK_KEY), timeout=10)
                for name in ("newInspection", "detectionFinished", "createReport"):
                    events.UpdateEventConfig(pb["event_config"].UpdateEventConfigRequest(
                        event_name_raw=name, webhook=True), timeout=10)
                subscriber = pb["event_grpc"].EventServiceStub(channel).Subscribe(
                    pb["event"].SubscribeRequest(), timeout=60)
                damage = pb["damage_grpc"].DamageServiceStub(channel)
                # StreamDamageResults: submission, then the three events, then OK.
                messages = list(damage.StreamDamageResults(pb["damage"].StreamDamageResultsRequest(
                    urls=["https://images.example.com/flow/front.jpg"]), timeout=60))
                self.assertTrue(messages[0].HasField("submitted"))
                inspection_id = messages[0].submitted.inspection_id
                self.assertEqual([m.event.event_name_raw for m in messages[1:]],
                                 ["newInspection", "detectionFinished", "createReport"])
                # The plain subscriber saw the same three, with a typed report.
                got = []
                for response in subscriber:
                    if response.event.inspection_id == inspection_id:
                        got.append(response.event)
                    if len(got) == 3:
                        break
                subscriber.cancel()
                self.assertEqual([e.event_name_raw for e in got],
                                 ["newInspection", "detectionFinished", "createReport"])
                self.assertEqual(got[2].create_report.message, "Report OK")
                data = got[2].create_report.data_api.data
                self.assertTrue(data.HasField("damage_number"))
                self.assertEqual(data.damage_number,
                                 sum(len(v.damages) for v in data.damages.values()))
                self.assertEqual(len(data.detection_list), 1)  # one image submitted
                channel.close()
            finally:
                self.assertEqual(gateway.stop(), 0)
        finally:
            self.assertEqual(sandbox.stop(), 0)

    def test_two_replicas_share_one_redis_log(self):
        port = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def redis_up():
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                        s.sendall(b"PING\r\n")
                        return s.recv(16).startswith(b"+PONG")
                except OSError:
                    return False
            wait_for(redis_up, 20, "redis-server")
            log = f"redis://127.0.0.1:{port}/0?stream=e2e:events"
            a, b = Gateway(log), Gateway(log)
            try:
                on_b = Subscription(self.pb, b.grpc, from_start=True)
                total = 30
                for n in range(total // 2):
                    self.assertEqual(a.post(event(n)), 200)  # posted to A...
                wait_for(lambda: on_b.count() >= total // 2, 30, "events on replica B")  # ...seen on B
                b.kill9()
                on_b.thread.join(timeout=30)
                seen = list(on_b.events)
                on_b.channel.close()
                for n in range(total // 2, total):
                    self.assertEqual(a.post(event(n)), 200)
                resumed = Subscription(self.pb, a.grpc, after_cursor=seen[-1][0])
                wait_for(lambda: len(seen) + resumed.count() >= total, 30, "the rest on replica A")
                self.assert_exactly_once_in_order(seen + resumed.events, total)
                resumed.close()
            finally:
                self.assertEqual(a.stop(), 0)
                if b.process.proc.poll() is None:
                    b.stop()
        finally:
            redis.terminate()
            redis.wait(timeout=20)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--sandbox", required=True)
    parser.add_argument("--proto-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
