"""The gateway's OTLP/HTTP JSON span export against the official opentelemetry-proto
parser, end to end: the real binary in --sandbox mode exports to a collector on a loopback
port; a gRPC call with a W3C traceparent produces a server span under the caller's span and
a client span per vendor attempt under it, and the log lines carry the same ids.

OTLP/JSON differs from the proto3 JSON mapping in one place: trace and span ids are hex
strings, not base64 (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding). The
test checks that the ids are lower-case hex of the right length, turns them into the bytes
they stand for, and then parses the whole body strictly (unknown fields fail) with
google.protobuf.json_format into ExportTraceServiceRequest."""

import argparse
import base64
import json
import re
import sys
import tempfile
import unittest

from e2e_support import Process, Receiver, load_stubs, wait_for

ARGS = None
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


HEX = {"traceId": 32, "spanId": 16, "parentSpanId": 16}


def to_proto_json(body):
    """OTLP/JSON -> proto3 JSON: checks each id is lower-case hex of its length and
    re-encodes it as base64 of its bytes."""
    request = json.loads(body)
    for resource_spans in request["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key, length in HEX.items():
                    if key not in span:
                        continue
                    value = span[key]
                    if not re.fullmatch("[0-9a-f]{%d}" % length, value):
                        raise AssertionError(f"{key} {value!r} is not {length} lower-case hex")
                    span[key] = base64.b64encode(bytes.fromhex(value)).decode()
    return json.dumps(request)


def parse(body):
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    message = trace_service_pb2.ExportTraceServiceRequest()
    json_format.Parse(to_proto_json(body), message, ignore_unknown_fields=False)
    return message


def attributes(span):
    out = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which)
    return out


class OtlpExport(unittest.TestCase):
    def test_spans_parse_with_the_official_protos_and_link_to_the_callers_trace(self):
        import grpc
        from opentelemetry.proto.trace.v1 import trace_pb2
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        pb = load_stubs(ARGS.proto_dir, tmp.name)
        collector = Receiver(path="/v1/traces")  # an OTLP/HTTP collector stand-in
        self.addCleanup(collector.stop)
        gateway = Process([ARGS.gateway, "--sandbox", "--grpc-addr=127.0.0.1:0",
                           "--webhook-addr=127.0.0.1:0", "--admin-addr=127.0.0.1:0",
                           "--log-level=debug",
                           f"--tracing-otlp-endpoint={collector.url}",
                           "--tracing-export-interval-ms=50",
                           f"--event-log=sqlite:{tmp.name}/events.db"],
                          env={"INSPECTION_API_KEY": ""})
        exit_code = None
        try:
            port = gateway.wait_json_line("inspection-gateway serving")["grpc_port"]
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                images = pb["image_grpc"].ImageServiceStub(channel)
                request = pb["image"].AssessQualityRequest(
                    url="https://images.example.com/otlp/front.jpg")
                quality, call = images.AssessQuality.with_call(
                    request, timeout=30,
                    metadata=[("traceparent", f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
                              ("tracestate", "congo=t61rcWkgMzE")])
                headers = dict(call.initial_metadata())
                self.assertEqual(headers.get("x-trace-id"), CALLER_TRACE)
                self.assertTrue(quality.ListFields())

            def exported():
                spans = []
                with collector.lock:
                    bodies = [d["raw"] for d in collector.deliveries]
                for body in bodies:
                    message = parse(body)
                    for resource_spans in message.resource_spans:
                        for scope_spans in resource_spans.scope_spans:
                            spans.extend(scope_spans.spans)
                mine = [s for s in spans if s.trace_id.hex() == CALLER_TRACE]
                return mine if len(mine) >= 2 else None

            mine = wait_for(exported, 30, "the call's spans at the collector")
            with collector.lock:
                first = collector.deliveries[0]
            self.assertEqual(first["path"], "/v1/traces")
            self.assertEqual(first["content-type"], "application/json")
            resource = parse(first["raw"]).resource_spans[0].resource
            self.assertEqual(attributes(resource)["service.name"], "inspection-gateway")

            server = [s for s in mine if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
            client = [s for s in mine if s.kind == trace_pb2.Span.SPAN_KIND_CLIENT]
            self.assertEqual(len(server), 1, mine)
            self.assertEqual(len(client), 1, mine)
            server, client = server[0], client[0]
            self.assertEqual(server.name, "inspection.v1.ImageService/AssessQuality")
            self.assertEqual(server.parent_span_id.hex(), CALLER_SPAN)
            self.assertEqual(server.trace_state, "congo=t61rcWkgMzE")
            self.assertEqual(client.parent_span_id, server.span_id)
            self.assertNotEqual(client.span_id, server.span_id)
            self.assertEqual(len(client.span_id), 8)
            self.assertGreater(server.start_time_unix_nano, 1_600_000_000 * 10**9)
            self.assertGreaterEqual(server.end_time_unix_nano, server.start_time_unix_nano)
            self.assertGreaterEqual(client.end_time_unix_nano, client.start_time_unix_nano)
            self.assertEqual(attributes(server)["rpc.system"], "grpc")
            self.assertEqual(attributes(server)["rpc.grpc.status_code"], 0)
            self.assertEqual(attributes(server)["inspection.attempts"], 1)
            self.assertEqual(attributes(client)["http.response.status_code"], 200)
            self.assertEqual(attributes(client)["http.request.method"], "POST")
            self.assertEqual(attributes(client)["inspection.attempt"], 1)

            # The log lines of the call name the same trace and spans.
            line = gateway.wait_json_line('"msg":"rpc finished"')
            self.assertEqual(line["trace_id"], CALLER_TRACE)
            self.assertEqual(line["span_id"], server.span_id.hex())
            attempt = gateway.wait_json_line('"msg":"vendor attempt"')
            self.assertEqual(attempt["trace_id"], CALLER_TRACE)
            self.assertEqual(attempt["span_id"], client.span_id.hex())
        finally:
            exit_code = gateway.stop()
        self.assertEqual(exit_code, 0, "\n".join(gateway.lines[-20:]))


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--proto-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
