#!/usr/bin/env python3
"""Seeds for fuzz/corpus/ taken from the tests' own fixtures (one-off; re-run to refresh).

vendor_codec:  every vendor answer an integration test plays (VendorReplies / RespondWith
               with a raw JSON literal), prefixed with the byte of the response type of the
               RPC the test then calls; createReport payloads from the webhook tests as type 15.
webhook_json:  every JSON object literal of tests/webhooks/webhook_receiver_test.cc.
Writes files named seed-<sha1 prefix>; existing files are left alone.
"""
import hashlib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"

# fuzz/vendor_codec_fuzzer.cc's selector byte per RPC.
TYPES = {
    "CreateToken": 0, "GetTokenStatus": 1, "WatchTokenStatus": 1, "SearchInspections": 2,
    "GetDamagesReport": 3, "GetWebhookConfig": 4, "UpdateWebhookConfig": 5,
    "ListEventConfigs": 6, "UpdateEventConfig": 7, "TestWebhook": 8, "RemoveBackground": 9,
    "AssessQuality": 10, "AssessQualityBatch": 11, "SegmentVehicle": 12, "SegmentParts": 13,
    "DetectDamage": 14,
}
RAW = re.compile(r'R"(\w*)\((.*?)\)\1"', re.S)
REPLY = re.compile(r'(?:VendorReplies|RespondWith|Reply)\(\s*\d+\s*,\s*R"(\w*)\((.*?)\)\1"', re.S)
CALL = re.compile(r'->(' + "|".join(TYPES) + r')\(')


def write(target, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("seed-" + hashlib.sha1(data).hexdigest()[:12])
    if not path.exists():
        path.write_bytes(data)


def compact(text):
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value


def main():
    for test in sorted((ROOT / "tests" / "integration").glob("*_test.cc")):
        source = test.read_text()
        for match in REPLY.finditer(source):
            body = match.group(2)
            if compact(body) is None:
                continue
            call = CALL.search(source, match.end())
            if call is None or call.start() - match.end() > 3000:
                continue
            write("vendor_codec", bytes([TYPES[call.group(1)]]) + body.encode())
    webhook_test = ROOT / "tests" / "webhooks" / "webhook_receiver_test.cc"
    for match in RAW.finditer(webhook_test.read_text()):
        value = compact(match.group(2))
        if isinstance(value, dict):
            write("webhook_json", match.group(2).encode())
            if value.get("event") == "createReport":
                write("vendor_codec", bytes([15]) + match.group(2).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
