#!/usr/bin/env bash
# End to end on a real cluster: installs switchyard on a kind (or k3d) cluster, submits a
# small TrainingJob, checks that its pods are bound by switchyard, swaps the active
# policy through the API, checks the swap, and uninstalls.
#
# It needs Docker, kind (or k3d with E2E_K3D=1), kubectl, curl and jq, and so it cannot
# run where there is no container engine (CI runs only `shellcheck` on it). Run it from
# the repository's root:
#
#   tests/e2e/kind.sh                 # makes a cluster switchyard-e2e and deletes it after
#   E2E_KEEP=1 tests/e2e/kind.sh      # leaves the cluster and the install for a look
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER="${E2E_CLUSTER:-switchyard-e2e}"
IMAGE="${E2E_IMAGE:-switchyard:e2e}"
NS=switchyard
JOB_NS=switchyard-e2e
PORT="${E2E_PORT:-18080}"

step() { printf '\n==> %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }
for tool in docker kubectl curl jq; do
    command -v "$tool" >/dev/null || fail "$tool is not installed"
done
if [ "${E2E_K3D:-0}" = 1 ]; then
    command -v k3d >/dev/null || fail "k3d is not installed"
else
    command -v kind >/dev/null || fail "kind is not installed"
fi

forward_pid=""
cleanup() {
    if [ -n "$forward_pid" ]; then kill "$forward_pid" 2>/dev/null || true; fi
    if [ "${E2E_KEEP:-0}" != 1 ]; then
        step "uninstall"
        kubectl delete namespace "$JOB_NS" --ignore-not-found --wait=false || true
        kubectl delete -k deploy/ --ignore-not-found || true
        if [ "${E2E_K3D:-0}" = 1 ]; then k3d cluster delete "$CLUSTER" || true
        else kind delete cluster --name "$CLUSTER" || true; fi
    fi
}
trap cleanup EXIT

step "cluster $CLUSTER and image $IMAGE"
docker build -t "$IMAGE" .
if [ "${E2E_K3D:-0}" = 1 ]; then
    k3d cluster list "$CLUSTER" >/dev/null 2>&1 || k3d cluster create "$CLUSTER" --agents 2 --wait
    k3d image import "$IMAGE" --cluster "$CLUSTER"
else
    kind get clusters | grep -qx "$CLUSTER" || kind create cluster --name "$CLUSTER" --wait 120s
    kind load docker-image "$IMAGE" --name "$CLUSTER"
fi

step "install"
kubectl apply -f deploy/namespace.yaml
kubectl create secret generic switchyard-api-token -n "$NS" \
    --from-literal=token="$(openssl rand -hex 32)" --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -k deploy/
kubectl set image -n "$NS" deployment/switchyard controller="$IMAGE"
kubectl patch -n "$NS" deployment/switchyard --type=json \
    -p '[{"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "IfNotPresent"}]'
kubectl rollout status -n "$NS" deployment/switchyard --timeout=180s
kubectl wait -n "$NS" pod -l switchyard.dev/leader=true --for=condition=Ready --timeout=120s

step "submit a job"
kubectl create namespace "$JOB_NS" --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -f - <<YAML
apiVersion: switchyard.dev/v1alpha1
kind: TrainingJob
metadata: {name: tiny, namespace: $JOB_NS}
spec:
  progress:
    log:
      container: trainer
      pattern: 'step (?P<step>\d+) loss: (?P<value>[0-9.]+)'
  roles:
    - name: worker
      replicas: 2
      template:
        spec:
          containers:
            - name: trainer
              image: busybox:1.36
              command: ["sh", "-c", "for i in \$(seq 1 600); do echo \"step \$i loss: 0.\$((1000 - i))\"; sleep 1; done"]
              resources: {requests: {cpu: 10m, memory: 16Mi}}
YAML

step "its pods are bound by switchyard"
for _ in $(seq 1 60); do
    bound=$(kubectl get pods -n "$JOB_NS" -l switchyard.dev/job=tiny -o json |
        jq '[.items[] | select(.spec.schedulerName == "switchyard" and .spec.nodeName != null)] | length')
    [ "$bound" = 2 ] && break
    sleep 2
done
[ "$bound" = 2 ] || fail "the job's pods were not bound (bound: $bound)"
kubectl get pods -n "$JOB_NS" -o wide

step "swap the policy through the Service (it reaches the leader)"
kubectl port-forward -n "$NS" svc/switchyard "$PORT:80" >/dev/null &
forward_pid=$!
for _ in $(seq 1 30); do curl -fs "localhost:$PORT/readyz" >/dev/null && break; sleep 1; done
token=$(kubectl get secret switchyard-api-token -n "$NS" -o jsonpath='{.data.token}' | base64 -d)
before=$(curl -fs "localhost:$PORT/v1/status" | jq -r .active)
target=flowcon
[ "$before" = flowcon ] && target=specon
curl -fs -X POST -H "Authorization: Bearer $token" "localhost:$PORT/v1/policies/$target/activate" >/dev/null
after=$(curl -fs "localhost:$PORT/v1/status" | jq -r .active)
[ "$after" = "$target" ] || fail "the active policy is $after, not $target"
echo "active policy: $before -> $after"

step "passed"
