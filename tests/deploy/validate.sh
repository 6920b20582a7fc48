#!/usr/bin/env bash
# Validates every manifest in deploy/, the Kubernetes manifests in examples/ and the Job
# that `switchyard sweep --emit-job` writes against the official Kubernetes OpenAPI
# schemas (the `kubernetes-validate` package from PyPI, installed into a private venv).
# Objects of kinds the official schemas do not know are checked by validate_crs.py
# against their CRD: TrainingJob against the one generated from the Rust types, JobSet,
# PyTorchJob and TrainJob against the published ones in tests/crds/. A copy of each
# example with one field of the wrong type, and one with an unknown field, must be
# refused. deploy/ is rendered with each integration component of deploy/integrations/
# (kustomize.py; compared with `kubectl kustomize` where kubectl is installed), validated,
# and checked for what the component may change (check_integrations.py); the same for
# the pod webhook's component deploy/webhook/ (check_webhook.py), whose cert-manager
# objects are checked against cert-manager's CRDs in tests/crds/cert-manager/.
# install_steps.py follows the README's install steps in order against the manifests.
# deploy/monitoring/: the ServiceMonitor and PrometheusRule against the Prometheus
# Operator's CRD schemas (npm), the alert rules and every dashboard query through
# promtool (Debian's prometheus package, unpacked, not installed), and the alerts'
# unit tests (alerts.test.yaml).
#
#   tests/deploy/validate.sh    # uses .venv-deploy/, .kube-models/, .promtool/ (made on first run)
set -euo pipefail
cd "$(dirname "$0")/../.."

K8S_VERSION="${K8S_VERSION:-1.33.0}"
VENV="${VENV:-.venv-deploy}"
if [ ! -x "$VENV/bin/kubernetes-validate" ] || ! "$VENV/bin/python" -c 'import jsonpatch' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet 'kubernetes-validate==1.37.0' 'jsonschema>=4' 'pyyaml>=6' 'jsonpatch==1.33'
fi

manifests=(deploy/namespace.yaml deploy/crd.yaml deploy/rbac.yaml deploy/configmap.yaml
    deploy/deployment.yaml deploy/service.yaml deploy/pdb.yaml
    deploy/monitoring/service-metrics.yaml deploy/policy-image-volume.yaml)
# Every file a kustomization names is checked: a new one must be added above (the
# Prometheus Operator's objects are checked against its CRDs further down).
"$VENV/bin/python" - "${manifests[@]}" <<'PY'
import os, sys, yaml
checked = set(sys.argv[1:])
for directory in ("deploy", "deploy/monitoring"):
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    for resource in kustomization.get("resources", []):
        path = os.path.join(directory, resource)
        with open(path) as f:
            operator = all(d["apiVersion"].startswith("monitoring.coreos.com/")
                           for d in yaml.safe_load_all(f) if d)
        if path not in checked and not operator:
            sys.exit(f"ERROR {path} is in {directory}/kustomization.yaml but not validated")
    for generator in kustomization.get("configMapGenerator", []):
        for entry in generator.get("files", []):
            path = os.path.join(directory, entry.split("=", 1)[-1])
            if not os.path.isfile(path):
                sys.exit(f"ERROR {directory}/kustomization.yaml names {path}, which does not exist")
PY
echo "kubernetes-validate $("$VENV/bin/pip" show kubernetes-validate | sed -n 's/^Version: //p'), schemas for Kubernetes $K8S_VERSION"
"$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" "${manifests[@]}"

# The examples of existing job kinds adopted by switchyard (docs/kubernetes.md): built-in
# kinds against the official schemas, custom ones against their projects' CRDs. Every
# Kubernetes manifest in examples/ must be named here.
work="$(mktemp -d)"
overlay=""
trap 'rm -rf "$work" "$overlay"' EXIT
JOBSET_CRD=tests/crds/jobset/jobset.x-k8s.io_jobsets.yaml
PYTORCHJOB_CRD=tests/crds/kubeflow-training/kubeflow.org_pytorchjobs.yaml
TRAINJOB_CRD=tests/crds/kubeflow-trainer/trainer.kubeflow.org_trainjobs.yaml
builtin_examples=(examples/adopt-job.yaml)
crd_examples=("$JOBSET_CRD=examples/adopt-jobset.yaml" "$PYTORCHJOB_CRD=examples/adopt-pytorchjob.yaml"
    "$TRAINJOB_CRD=examples/adopt-trainjob.yaml" "deploy/crd.yaml=examples/trainingjob.yaml")
for example in examples/*.yaml; do
    grep -q '^apiVersion:' "$example" || continue
    case " ${builtin_examples[*]} ${crd_examples[*]} " in
        *[\ =]"$example "*) ;;
        *) echo "ERROR $example is a Kubernetes manifest that tests/deploy/validate.sh does not validate"; exit 1 ;;
    esac
done
"$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" "${builtin_examples[@]}"
for pair in "${crd_examples[@]}"; do
    "$VENV/bin/python" tests/deploy/validate_crs.py "${pair%%=*}" "${pair#*=}"
done
# The validators can fail: a field of the wrong type, or one no schema knows (a gate
# misspelled), in a copy of each example, is refused, by an error that names the field
# (not by a crash).
refused() {
    local what=$1 field=$2
    shift 2
    if "$@" >"$work/out" 2>&1; then
        cat "$work/out"
        echo "ERROR $what was accepted"
        exit 1
    fi
    if ! grep -q "ERROR.*$field" "$work/out"; then
        cat "$work/out"
        echo "ERROR $what failed without an error naming $field"
        exit 1
    fi
    echo "INFO $what is refused: $(grep -m1 -o 'ERROR.*' "$work/out")"
}
while read -r example kind field value; do
    copy="$work/$(basename "$example" .yaml)-${field##*.}.yaml"
    "$VENV/bin/python" tests/deploy/break_field.py "$example" "$copy" "$kind" "$field" "$value"
    if [ "$kind" = Job ]; then
        refused "$example with $field: $value" "${field##*.}" \
            "$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" "$copy"
    else
        crd=$(printf '%s\n' "${crd_examples[@]}" | grep "=$example\$")
        refused "$example with $field: $value" "${field##*.}" \
            "$VENV/bin/python" tests/deploy/validate_crs.py "${crd%%=*}" "$copy"
    fi
done <<'BROKEN'
examples/adopt-job.yaml Job spec.parallelism eight
examples/adopt-job.yaml Job spec.template.spec.schedulingGate [{name: switchyard.dev/placement}]
examples/adopt-jobset.yaml JobSet spec.failurePolicy.maxRestarts three
examples/adopt-jobset.yaml JobSet spec.failurePolicy.maxRestart 3
examples/adopt-pytorchjob.yaml PyTorchJob spec.pytorchReplicaSpecs.Worker.replicas four
examples/adopt-pytorchjob.yaml PyTorchJob spec.pytorchReplicaSpecs.Worker.restartPolicy [OnFailure]
examples/adopt-trainjob.yaml TrainJob spec.trainer.numNodes four
examples/adopt-trainjob.yaml TrainJob spec.runtimePatch []
BROKEN

# deploy/integrations/: each component on deploy/, then all of them, rendered as
# `kubectl kustomize` would (an overlay must sit beside deploy/: kustomize takes
# relative paths only), validated, and checked for what it may change.
overlay="$(mktemp -d -p tests/deploy .overlay.XXXXXX)"
render() {
    printf 'resources: [../../../deploy]\ncomponents: [%s]\n' "$1" >"$overlay/kustomization.yaml"
    "$VENV/bin/python" tests/deploy/kustomize.py "$overlay" "$2"
    # A kubectl too old for components (before 1.21) is no reference.
    if command -v kubectl >/dev/null && kubectl kustomize "$overlay" >"$work/kubectl.yaml" 2>"$work/kubectl.err"; then
        compared=$((compared + 1))
        "$VENV/bin/python" - "$2" "$work/kubectl.yaml" <<'PY'
import sys, yaml
def objects(path):
    with open(path) as f:
        return {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
                for d in yaml.safe_load_all(f) if d}
ours, kubectl = objects(sys.argv[1]), objects(sys.argv[2])
if ours != kubectl:
    sys.exit(f"ERROR kustomize.py and kubectl kustomize differ on {sorted(k for k in ours.keys() | kubectl.keys() if ours.get(k) != kubectl.get(k))}")
PY
    fi
}
"$VENV/bin/python" tests/deploy/kustomize.py deploy "$work/base.yaml"
compared=0
integrations=()
components=()
for component in deploy/integrations/*/; do
    kind=$(basename "$component")
    components+=("../../../deploy/integrations/$kind")
    render "../../../deploy/integrations/$kind" "$work/$kind.yaml"
    integrations+=("$kind=$work/$kind.yaml")
done
render "$(IFS=,; echo "${components[*]}")" "$work/all.yaml"
echo "INFO kustomize.py rendered ${#components[@]} components; compared with kubectl kustomize: $compared renderings"
# Every component's objects are in all.yaml.
"$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" "$work/all.yaml"
"$VENV/bin/python" tests/deploy/check_integrations.py "$work/base.yaml" "${integrations[@]}" "$work/all.yaml"
# deploy/webhook/: the pod webhook's component on deploy/, alone and beside every
# integration, rendered and validated (the built-in kinds against the official schemas,
# cert-manager's Issuer and Certificate against its published CRDs in
# tests/crds/cert-manager/), and checked for what it changes and how its pieces name
# each other (check_webhook.py).
render "../../../deploy/webhook" "$work/webhook.yaml"
render "$(IFS=,; echo "${components[*]},../../../deploy/webhook")" "$work/all-webhook.yaml"
for rendered in "$work/webhook.yaml" "$work/all-webhook.yaml"; do
    "$VENV/bin/python" - "$rendered" "$work/builtin.yaml" "$work/cert-manager.yaml" <<'PY'
import sys, yaml
with open(sys.argv[1]) as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
cert_manager = [d for d in docs if d["apiVersion"].startswith("cert-manager.io/")]
yaml.safe_dump_all([d for d in docs if d not in cert_manager], open(sys.argv[2], "w"))
yaml.safe_dump_all(cert_manager, open(sys.argv[3], "w"))
PY
    "$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" "$work/builtin.yaml"
    for crd in tests/crds/cert-manager/cert-manager.io_issuers.yaml tests/crds/cert-manager/cert-manager.io_certificates.yaml; do
        "$VENV/bin/python" tests/deploy/validate_crs.py "$crd" "$work/cert-manager.yaml"
    done
done
"$VENV/bin/python" tests/deploy/check_webhook.py "$work/base.yaml" "$work/webhook.yaml"
# `switchyard sweep --emit-job`: the Indexed Job (and its workloads' ConfigMap) a sweep
# runs as, generated from the Rust types by the command itself.
sweep_job="$(mktemp --suffix=.yaml)"
cargo run --quiet -p switchyard -- sweep examples/quickstart.yaml examples/dragon-table1.yaml \
    --policy default --policy specon --set specon.alpha=0.01,0.02 --seeds 1..20 \
    --emit-job --results-claim sweep-results >"$sweep_job"
"$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" "$sweep_job"
rm -f "$sweep_job"
# The README's install steps, in order, against these manifests; what the steps create
# (namespaces, the token Secret) and the example's other objects (its claim) are checked
# against the official schemas too.
steps="$(mktemp --suffix=.yaml)"
trap 'rm -rf "$work" "$overlay" "$steps"' EXIT
"$VENV/bin/python" tests/deploy/install_steps.py README.md "$steps"
"$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" "$steps"

# deploy/monitoring/: the operator's objects against its CRD schemas.
MODELS="${MODELS:-.kube-models}"
if [ ! -d "$MODELS/node_modules/@kubernetes-models/prometheus-operator" ]; then
    npm install --prefix "$MODELS" --no-save --no-audit --no-fund --silent \
        '@kubernetes-models/prometheus-operator@6.0.0' 'js-yaml@4.1.0'
fi
node tests/deploy/validate_monitoring.mjs "$MODELS/node_modules" deploy/monitoring/*.yaml

# The alert rules and the dashboard's queries through promtool, and the alerts' tests.
PROMTOOL_DIR="${PROMTOOL_DIR:-.promtool}"
if [ ! -x "$PROMTOOL_DIR/usr/bin/promtool" ]; then
    mkdir -p "$PROMTOOL_DIR"
    (cd "$PROMTOOL_DIR" && apt-get download prometheus >/dev/null 2>&1 && dpkg -x prometheus_*.deb . && rm prometheus_*.deb)
fi
promtool="$PROMTOOL_DIR/usr/bin/promtool"
rules="$(mktemp -d)"
trap 'rm -rf "$work" "$overlay" "$steps" "$rules"' EXIT
"$VENV/bin/python" - "$rules" <<'PY'
import json, sys, yaml
out = sys.argv[1]
with open("deploy/monitoring/prometheusrule.yaml") as f:
    yaml.safe_dump(yaml.safe_load(f)["spec"], open(f"{out}/rules.yaml", "w"))
# Each dashboard query as a recording rule, so promtool parses it; Grafana's
# $__rate_interval becomes a plain range.
with open("deploy/monitoring/grafana-dashboard.json") as f:
    dashboard = json.load(f)
queries = [t["expr"].replace("$__rate_interval", "5m")
           for p in dashboard["panels"] for t in p.get("targets", [])]
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
    {"record": f"dashboard:query_{i}", "expr": q} for i, q in enumerate(queries)]}]},
    open(f"{out}/dashboard.yaml", "w"))
print(f"INFO {len(queries)} dashboard queries extracted")
PY
"$promtool" check rules "$rules/rules.yaml" "$rules/dashboard.yaml"
cp tests/deploy/alerts.test.yaml "$rules/"
"$promtool" test rules "$rules/alerts.test.yaml"
