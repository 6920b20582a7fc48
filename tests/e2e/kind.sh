#!/usr/bin/env bash
# End to end on a real cluster: installs switchyard on a kind (or k3d) cluster of three
# workers and runs, against a real kube-scheduler and kubelet, the flows the scripted
# scenarios of host/kube/tests run against the mock API server:
#
#   1. a gang placed: the controller creates its pods held by the switchyard.dev/placement
#      gate, pins each to the policy's node and lifts the gate; kube-scheduler binds them
#      there;
#   2. a placement kube-scheduler refuses (a resource no node has): the gang is taken
#      back, the refusal recorded in the job's status, and the job backs off;
#   3. a drain of a gang member: the eviction (through the job's PodDisruptionBudget)
#      restarts the whole gang, off the drained node;
#   4. a migration: SpeCon moves a converged job (this step waits for SpeCon's own
#      judgement, so it allows minutes);
#   5. a resize: FlowCon sets CPU weights, as in-place resizes (Kubernetes 1.33+);
#   6. a leader failover: the leader's pod is deleted, the other replica leads, and the
#      running job is not restarted;
#   7. an indexed batch Job adopted (examples/adopt-job.yaml, through the `job`
#      integration of deploy/integrations/): the Job controller creates its 8 pods gated,
#      switchyard pins and releases them as one gang, kube-scheduler binds them, the Job
#      completes, and switchyard never wrote it;
#   8. when the Kubeflow training operator's CRD is in the cluster, a PyTorchJob adopted
#      the same way (examples/adopt-pytorchjob.yaml, the `pytorchjob` integration).
#   9. with E2E_WEBHOOK=1, the pod webhook (deploy/webhook/, after cert-manager): the
#      indexed Job of step 7 again with the label alone, its pods gated by the webhook
#      and adopted; a pod of another queue is created ungated.
#
# It needs Docker, kind (or k3d with E2E_K3D=1), kubectl, curl and jq, and so it cannot
# run where there is no container engine (CI runs only `shellcheck` on it). Steps 7 and 8
# pull a PyTorch image (several GB) onto the nodes. Run it from the repository's root:
#
#   tests/e2e/kind.sh                 # makes a cluster switchyard-e2e and deletes it after
#   E2E_KEEP=1 tests/e2e/kind.sh      # leaves the cluster and the install for a look
#   E2E_TRAINING_OPERATOR=1 tests/e2e/kind.sh   # installs the training operator (v1.9.0)
#                                               # first, so that step 8 runs
#   E2E_PORT=18080 tests/e2e/kind.sh  # the API's local port (default: a free one that
#                                     # kubectl port-forward picks)
#   E2E_WEBHOOK=1 tests/e2e/kind.sh   # installs cert-manager (v1.21.1) first, so that
#                                     # step 9 runs
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER="${E2E_CLUSTER:-switchyard-e2e}"
IMAGE="${E2E_IMAGE:-switchyard:e2e}"
NS=switchyard
JOB_NS=switchyard-e2e
# The namespace the adoption examples name.
ADOPT_NS=ml
# The API's local port: E2E_PORT, or the free port `kubectl port-forward :80` took (read
# from its output, see api_forward), so two runs on one machine do not collide.
PORT=""

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
forward_log=$(mktemp)
overlay=""
cleanup() {
    if [ -n "$forward_pid" ]; then kill "$forward_pid" 2>/dev/null || true; fi
    rm -f "$forward_log"
    if [ "${E2E_KEEP:-0}" != 1 ]; then
        step "uninstall"
        kubectl delete namespace "$JOB_NS" "$ADOPT_NS" --ignore-not-found --wait=false || true
        if [ -n "$overlay" ]; then kubectl delete -k "$overlay" --ignore-not-found || true; fi
        kubectl delete -k deploy/ --ignore-not-found || true
        if [ "${E2E_K3D:-0}" = 1 ]; then k3d cluster delete "$CLUSTER" || true
        else kind delete cluster --name "$CLUSTER" || true; fi
    fi
    if [ -n "$overlay" ]; then rm -rf "$overlay"; fi
}
trap cleanup EXIT

# Waits up to $1 seconds for the command after it to succeed, every 2 s.
within() {
    local seconds=$1
    shift
    local waited=0
    until "$@"; do
        [ "$waited" -ge "$seconds" ] && return 1
        sleep 2
        waited=$((waited + 2))
    done
}

# Sets PORT to the local port of the running forward, once kubectl has said which
# ("Forwarding from 127.0.0.1:PORT -> 80").
forwarded_port() {
    PORT=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9][0-9]*\) -> .*/\1/p' "$forward_log" | head -n 1)
    [ -n "$PORT" ]
}
# The API, through the Service (it reaches the leader alone); restarts the forward.
api_forward() {
    if [ -n "$forward_pid" ]; then kill "$forward_pid" 2>/dev/null || true; fi
    : >"$forward_log"
    kubectl port-forward -n "$NS" svc/switchyard "${E2E_PORT:-}:80" >"$forward_log" 2>&1 &
    forward_pid=$!
    within 60 forwarded_port || fail "kubectl port-forward did not start: $(cat "$forward_log")"
    within 60 curl -fs "localhost:$PORT/readyz" -o /dev/null || fail "the API did not answer"
}
activate() {
    curl -fs -X POST -H "Authorization: Bearer $token" \
        "localhost:$PORT/v1/policies/$1/activate" >/dev/null || fail "activating $1"
}
job_status() { kubectl get trainingjob "$1" -n "$JOB_NS" -o json | jq -r "$2"; }

# A TrainingJob $1 of $2 workers (2 to 4 when $3 is "elastic", else exactly $2),
# checkpointing on the stop signal, whose loss falls from 1 by $4 per step (0: flat);
# $5, when given, is an extended resource each worker asks for one of.
submit() {
    local name=$1 workers=$2 min=$2 max=$2 drop=$4 resources="{cpu: 100m, memory: 16Mi}"
    if [ "$3" = elastic ]; then min=2; max=4; fi
    if [ -n "${5:-}" ]; then
        # An extended resource is asked for by its limit (requests follow it).
        resources="{requests: {cpu: 100m, memory: 16Mi}, limits: {$5: 1}}"
    else
        resources="{requests: $resources}"
    fi
    kubectl apply -f - <<YAML
apiVersion: switchyard.dev/v1alpha1
kind: TrainingJob
metadata: {name: $name, namespace: $JOB_NS}
spec:
  checkpoint: {method: Signal, gracePeriodSeconds: 5}
  progress:
    log:
      container: trainer
      pattern: 'step (?P<step>\d+) loss: (?P<value>[0-9.]+)'
  roles:
    - name: worker
      replicas: $workers
      minReplicas: $min
      maxReplicas: $max
      scalable: true
      template:
        spec:
          containers:
            - name: trainer
              image: busybox:1.36
              command: ["sh", "-c", "i=0; while true; do i=\$((i+1)); echo \"step \$i loss: \$(awk -v i=\$i -v d=$drop 'BEGIN{v=1-i*d; if (v<0.01) v=0.01; print v}')\"; sleep 2; done"]
              resources: $resources
YAML
}

step "cluster $CLUSTER (three workers) and image $IMAGE"
docker build -t "$IMAGE" .
if [ "${E2E_K3D:-0}" = 1 ]; then
    k3d cluster list "$CLUSTER" >/dev/null 2>&1 || k3d cluster create "$CLUSTER" --agents 3 --wait
    k3d image import "$IMAGE" --cluster "$CLUSTER"
else
    if ! kind get clusters | grep -qx "$CLUSTER"; then
        kind create cluster --name "$CLUSTER" --wait 120s --config - <<'YAML'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes: [{role: control-plane}, {role: worker}, {role: worker}, {role: worker}]
YAML
    fi
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
token=$(kubectl get secret switchyard-api-token -n "$NS" -o jsonpath='{.data.token}' | base64 -d)
api_forward
activate default
kubectl create namespace "$JOB_NS" --dry-run=client -o yaml | kubectl apply -f -

step "1. a gang placed: pinned and released by switchyard, bound by kube-scheduler"
submit gang 2 elastic 0.02
# Every pod bound, by the default scheduler, on the node its pin names, its gate gone.
pinned_and_bound() {
    kubectl get pods -n "$JOB_NS" -l switchyard.dev/job=gang -o json | jq -e '
        [.items[] | select(.metadata.deletionTimestamp == null)] as $pods
        | ($pods | length) == 2 and all($pods[];
            .spec.schedulerName == "default-scheduler"
            and .spec.nodeName != null
            and ((.spec.schedulingGates // []) | map(.name) | index("switchyard.dev/placement") | not)
            and .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
                .nodeSelectorTerms[0].matchFields[0].values[0] == .spec.nodeName)' >/dev/null
}
within 120 pinned_and_bound || fail "the gang's pods were not bound where switchyard pinned them"
kubectl get pods -n "$JOB_NS" -o wide
[ "$(kubectl get pdb gang -n "$JOB_NS" -o jsonpath='{.spec.maxUnavailable}')" = 1 ] \
    || fail "the job has no PodDisruptionBudget"

step "2. a placement kube-scheduler refuses comes back and backs off"
submit greedy 1 fixed 0.01 example.com/fpga
refused() { [ "$(job_status greedy '.status.refusal.count // 0')" -ge 1 ]; }
within 180 refused || fail "the refused placement was not recorded"
job_status greedy '.status.refusal'
[ "$(job_status greedy '.status.conditions[] | select(.type == "PodsScheduled") | .status')" = False ] \
    || fail "PodsScheduled is not False"
kubectl events -n "$JOB_NS" --for trainingjob/greedy | grep -q PlacementRefused \
    || fail "no PlacementRefused Event"
kubectl delete trainingjob greedy -n "$JOB_NS"

step "3. a drained gang member restarts the whole gang"
generation=$(job_status gang '.status.generation // 0')
victim=$(kubectl get pods -n "$JOB_NS" -l switchyard.dev/job=gang -o jsonpath='{.items[0].spec.nodeName}')
kubectl drain "$victim" --ignore-daemonsets --delete-emptydir-data --timeout=180s
restarted() {
    [ "$(job_status gang '.status.generation // 0')" -gt "$generation" ] \
        && [ "$(job_status gang '.status.disruptions // 0')" -ge 1 ] \
        && pinned_and_bound
}
within 240 restarted || fail "the gang did not restart after the drain"
kubectl get pods -n "$JOB_NS" -l switchyard.dev/job=gang -o json \
    | jq -e --arg n "$victim" '[.items[] | select(.spec.nodeName == $n)] | length == 0' >/dev/null \
    || fail "a member was placed on the drained node"
kubectl uncordon "$victim"

step "4. a migration: SpeCon moves a converged job"
submit flat 1 fixed 0
submit busy-a 1 fixed 0.05
submit busy-b 1 fixed 0.05
# SpeCon categorises every 30 s (its default `interval`): the flat job converges first.
activate specon
migrated() {
    kubectl get trainingjobs -n "$JOB_NS" -o json \
        | jq -e '[.items[].status.moves // [] | .[] | select(.kind == "Migrated")] | length > 0' >/dev/null
}
within 600 migrated || fail "SpeCon moved no job within 10 minutes"
kubectl get trainingjobs -n "$JOB_NS"

step "5. a resize: FlowCon's CPU weights, in place"
activate flowcon
resized() {
    kubectl get trainingjobs -n "$JOB_NS" -o json \
        | jq -e '[.items[].status.conditions // [] | .[] | select(.type == "CpuWeightApplied")] | length > 0' >/dev/null
}
within 600 resized || fail "FlowCon set no CPU weight within 10 minutes"
kubectl get trainingjobs -n "$JOB_NS" -o json \
    | jq -c '.items[] | {name: .metadata.name, weight: [.status.conditions // [] | .[] | select(.type == "CpuWeightApplied")]}'

step "6. leader failover: the other replica leads, the running gang is not restarted"
activate default
leader=$(kubectl get pods -n "$NS" -l switchyard.dev/leader=true -o jsonpath='{.items[0].metadata.name}')
generation=$(job_status gang '.status.generation')
kubectl delete pod -n "$NS" "$leader" --wait=false
new_leader() {
    local now
    now=$(kubectl get pods -n "$NS" -l switchyard.dev/leader=true -o jsonpath='{.items[0].metadata.name}' 2>/dev/null)
    [ -n "$now" ] && [ "$now" != "$leader" ]
}
within 120 new_leader || fail "no other replica took the lead"
api_forward
curl -fs "localhost:$PORT/v1/status" | jq -c '{active, leading, leader}'
sleep 20
[ "$(job_status gang '.status.generation')" = "$generation" ] \
    || fail "the failover restarted the gang"
[ "$(job_status gang '.status.phase')" = Running ] || fail "the gang is not running"

step "7. an indexed batch Job adopted: placed as one gang by switchyard, run by the Job controller"
if [ "${E2E_TRAINING_OPERATOR:-0}" = 1 ]; then
    kubectl apply --server-side -k "github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9.0"
    kubectl wait -n kubeflow --for=condition=Available deployment/training-operator --timeout=300s
fi
components="../deploy/integrations/job"
with_pytorchjob=0
if kubectl get crd pytorchjobs.kubeflow.org >/dev/null 2>&1; then
    with_pytorchjob=1
    components="$components, ../deploy/integrations/pytorchjob"
fi
# The integrations are enabled as a user does, in an overlay beside deploy/ (kustomize
# takes relative paths only), here with the image under test.
overlay=$(mktemp -d -p . .e2e-overlay.XXXXXX)
cat >"$overlay/kustomization.yaml" <<YAML
resources: [../deploy]
components: [$components]
patches:
  - target: {kind: Deployment, name: switchyard}
    patch: |-
      - {op: replace, path: /spec/template/spec/containers/0/image, value: "$IMAGE"}
      - {op: add, path: /spec/template/spec/containers/0/imagePullPolicy, value: IfNotPresent}
YAML
kubectl apply -k "$overlay"
kubectl rollout status -n "$NS" deployment/switchyard --timeout=180s
kubectl get deployment switchyard -n "$NS" -o json \
    | jq -e '.spec.template.spec.containers[0].args | index("--integrations=job")' >/dev/null \
    || fail "the job integration did not reach the controller's arguments"
one_ready_leader() {
    kubectl get pods -n "$NS" -l switchyard.dev/leader=true -o json | jq -e '
        [.items[] | select(.metadata.deletionTimestamp == null
            and any(.status.conditions[]?; .type == "Ready" and .status == "True"))]
        | length == 1' >/dev/null
}
within 120 one_ready_leader || fail "no replica of the new controller leads"
kubectl create namespace "$ADOPT_NS" --dry-run=client -o yaml | kubectl apply -f -
# Every pod of the owner ($1: a label selector; $2 of them) bound where switchyard pinned
# it, its gate lifted.
adopted_and_bound() {
    kubectl get pods -n "$ADOPT_NS" -l "$1" -o json | jq -e --argjson n "$2" '
        [.items[] | select(.metadata.deletionTimestamp == null)] as $pods
        | ($pods | length) == $n and all($pods[];
            .spec.nodeName != null
            and ((.spec.schedulingGates // []) | map(.name) | index("switchyard.dev/placement") | not)
            and .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
                .nodeSelectorTerms[0].matchFields[0].values[0] == .spec.nodeName)' >/dev/null
}
# The owner is never written: no field of it, status included, is managed by the
# controller's field manager.
never_written() {
    kubectl get "$1" -n "$ADOPT_NS" -o json \
        | jq -e '[.metadata.managedFields[]?.manager] | index("switchyard") | not' >/dev/null
}
# Applies the example $1, whose owner $2 (kind/name) has $4 pods selected by $3; waits
# for them to be bound where switchyard pinned them, then for the owner's condition $5.
run_adopted() {
    local example=$1 owner=$2 selector=$3 pods=$4 condition=$5
    kubectl apply -f "$example"
    within 300 adopted_and_bound "$selector" "$pods" \
        || fail "the $pods pods of $owner were not bound where switchyard pinned them"
    kubectl get pods -n "$ADOPT_NS" -l "$selector" -o wide
    # The pulls of the PyTorch image take most of this.
    kubectl wait -n "$ADOPT_NS" --for=condition="$condition" "$owner" --timeout=1800s \
        || fail "the adopted $owner did not reach $condition"
    never_written "$owner" || fail "switchyard wrote $owner"
}
run_adopted examples/adopt-job.yaml job/adopt-job batch.kubernetes.io/job-name=adopt-job 8 Complete
[ "$(kubectl get job adopt-job -n "$ADOPT_NS" -o jsonpath='{.metadata.generation}')" = 1 ] \
    || fail "the Job's spec changed"
# The line the controller reads the loss from, by default, in the log of the Job's pod.
log=$(kubectl logs -n "$ADOPT_NS" job/adopt-job)
grep -q '^switchyard: step=300 loss=' <<<"$log" || fail "the Job's log has no loss line for its last step"

step "8. a PyTorchJob adopted through the pytorchjob integration"
if [ "$with_pytorchjob" = 1 ]; then
    run_adopted examples/adopt-pytorchjob.yaml pytorchjob/adopt-pytorchjob \
        training.kubeflow.org/job-name=adopt-pytorchjob 5 Succeeded
else
    echo "skipped: no PyTorchJob CRD in the cluster (E2E_TRAINING_OPERATOR=1 installs the training operator)"
fi

step "9. the pod webhook: the label alone adopts a Job"
if [ "${E2E_WEBHOOK:-0}" = 1 ]; then
    kubectl apply -f https://github.com/cert-manager/cert-manager/releases/download/v1.21.1/cert-manager.yaml
    kubectl wait -n cert-manager --for=condition=Available deployment --all --timeout=300s
    sed -i "s|^components: \[\(.*\)\]$|components: [\1, ../deploy/webhook]|" "$overlay/kustomization.yaml"
    kubectl apply -k "$overlay"
    kubectl wait -n "$NS" --for=condition=Ready certificate/switchyard-webhook --timeout=180s
    kubectl rollout status -n "$NS" deployment/switchyard --timeout=180s
    within 120 one_ready_leader || fail "no replica of the controller with the webhook leads"
    kubectl delete job adopt-job -n "$ADOPT_NS" --cascade=foreground --wait=true
    label_only="$overlay/adopt-job-label-only.yaml"
    sed '/schedulingGates: \[{name: switchyard.dev\/placement}\]/d' examples/adopt-job.yaml >"$label_only"
    if grep -q schedulingGates "$label_only"; then fail "the gate is still in $label_only"; fi
    run_adopted "$label_only" job/adopt-job batch.kubernetes.io/job-name=adopt-job 8 Complete
    kubectl run other-queue -n "$ADOPT_NS" --image=busybox:1.36 --restart=Never \
        --labels=switchyard.dev/queue=elsewhere -- true
    [ "$(kubectl get pod other-queue -n "$ADOPT_NS" -o jsonpath='{.spec.schedulingGates}')" = "" ] \
        || fail "the webhook gated a pod of another queue"
else
    echo "skipped: E2E_WEBHOOK=1 installs cert-manager and the webhook"
fi

step "passed"
