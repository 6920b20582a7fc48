#!/usr/bin/env bash
# Validates every manifest in deploy/ and examples/trainingjob.yaml against the official
# Kubernetes OpenAPI schemas (the `kubernetes-validate` package from PyPI, installed into
# a private venv). Objects of kinds the official schemas do not know (TrainingJob) are
# checked against the CRD generated from the Rust types instead, by validate_crs.py.
# install_steps.py follows the README's install steps in order against the manifests.
#
#   tests/deploy/validate.sh            # uses .venv-deploy/ (created on first run)
set -euo pipefail
cd "$(dirname "$0")/../.."

K8S_VERSION="${K8S_VERSION:-1.33.0}"
VENV="${VENV:-.venv-deploy}"
if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet 'kubernetes-validate==1.37.0' 'jsonschema>=4' 'pyyaml>=6'
fi

manifests=(deploy/namespace.yaml deploy/crd.yaml deploy/rbac.yaml deploy/configmap.yaml
    deploy/deployment.yaml deploy/service.yaml)
echo "kubernetes-validate $("$VENV/bin/pip" show kubernetes-validate | sed -n 's/^Version: //p'), schemas for Kubernetes $K8S_VERSION"
"$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" "${manifests[@]}"
"$VENV/bin/python" tests/deploy/validate_crs.py deploy/crd.yaml examples/trainingjob.yaml
# The README's install steps, in order, against these manifests; what the steps create
# (namespaces, the token Secret) and the example's other objects (its claim) are checked
# against the official schemas too.
steps="$(mktemp --suffix=.yaml)"
trap 'rm -f "$steps"' EXIT
"$VENV/bin/python" tests/deploy/install_steps.py README.md "$steps"
"$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" "$steps"
