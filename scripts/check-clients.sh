#!/usr/bin/env bash
# ctest clients.every_language_generates (make clients, checked):
#   1. the committed Go module (clients/go) is what buf.gen.go.yaml generates now, and
#      docs/api.md what buf.gen.docs.yaml does: no diff;
#   2. make-clients.sh, into a scratch directory, generates Go (which builds), Java,
#      TypeScript, the Python package and its wheel, and the descriptor set;
#   3. the wheel installs in a fresh venv and imports; the descriptor set holds every
#      inspection/v1 file with source info (comments, for tools).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
fail() { echo "check-clients: FAIL: $*" >&2; exit 1; }

bash scripts/install-client-tools.sh
PATH="$root/.tools/bin:$PATH" .tools/bin/buf generate --template buf.gen.go.yaml -o "$scratch/go"
diff -r "$scratch/go/clients/go/inspection" clients/go/inspection >"$scratch/go.diff" ||
  fail "clients/go is stale: run make clients and commit it ($(head -3 "$scratch/go.diff"))"
echo "check-clients: clients/go is current"

CLIENTS_BASE="$scratch/all" bash scripts/make-clients.sh
diff "$scratch/all/docs/api.md" docs/api.md >"$scratch/docs.diff" ||
  fail "docs/api.md is stale: run make clients and commit it ($(head -3 "$scratch/docs.diff"))"
echo "check-clients: docs/api.md is current"
out="$scratch/all/clients"
for file in java/src/main/java/com/inspectiongateway/inspection/v1/TokenServiceGrpc.java \
            java/src/main/java/com/inspectiongateway/inspection/v1/CreateTokenRequest.java \
            ts/src/inspection/v1/token_pb.ts ts/src/inspection/v1/event_pb.ts \
            python/inspection/v1/token_pb2.pyi python/inspection/v1/token_pb2_grpc.py \
            descriptor/inspection-v1.binpb; do
  [ -s "$out/$file" ] || fail "make clients did not write $file"
done
grep -q "class TokenServiceGrpc" "$out/java/src/main/java/com/inspectiongateway/inspection/v1/TokenServiceGrpc.java" ||
  fail "no gRPC stub class in TokenServiceGrpc.java"
grep -q "export const TokenService" "$out/ts/src/inspection/v1/token_pb.ts" ||
  fail "no TokenService descriptor in token_pb.ts"

python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install --quiet --disable-pip-version-check "$out"/python/dist/*.whl
"$scratch/venv/bin/python" - "$out/descriptor/inspection-v1.binpb" <<'PY'
import sys
from google.protobuf import descriptor_pb2
from inspection.v1 import damage_pb2_grpc, event_pb2, token_pb2, token_pb2_grpc

assert token_pb2.GetTokenStatusRequest(uid="u").uid == "u"
assert hasattr(token_pb2_grpc, "TokenServiceStub") and hasattr(damage_pb2_grpc, "DamageServiceStub")
assert event_pb2.EVENT_SOURCE_RECONCILE == 2
files = descriptor_pb2.FileDescriptorSet.FromString(open(sys.argv[1], "rb").read()).file
ours = [f for f in files if f.name.startswith("inspection/v1/")]
assert len(ours) == 8, [f.name for f in ours]
assert all(f.HasField("source_code_info") for f in ours), "no source info"
assert all(f.options.go_package and f.options.java_package for f in ours), "file options"
print("check-clients: the wheel imports; the descriptor set has", len(files), "files")
PY
echo "check-clients: ok"
