"""Follows the README's install steps (the first `sh` block under "Running in a Kubernetes
cluster") against the manifests, in the order given, without a cluster.

usage: install_steps.py README.md OUT.yaml

Each step's objects are checked against what the steps before it created, as the API
server and the kubelet would: a namespaced object needs its namespace; a TrainingJob
needs the CRD applied by an earlier command (a CRD and its resources in one `apply` fail);
a Deployment's service account, ConfigMaps and Secrets (optional ones included: the
controller's API token), and a pod template's claims, must exist by the time its pods
start; `kubectl set image` and `rollout status` name an existing Deployment and container;
`kubectl get`/`events` name objects that exist (the Lease, which the controller creates,
excepted). Objects the commands create (namespaces, the Secret) are written to OUT.yaml
together with the non-custom objects of the examples applied, for kubernetes-validate.
"""
import os
import re
import shlex
import sys

import yaml

CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                  "PersistentVolume", "StorageClass", "PriorityClass"}
BUILT_IN_GROUPS = {"", "apps", "batch", "policy", "rbac.authorization.k8s.io", "apiextensions.k8s.io",
                   "coordination.k8s.io", "networking.k8s.io", "storage.k8s.io", "scheduling.k8s.io"}
CREATED_BY_THE_CONTROLLER = {("lease", "switchyard", "switchyard-leader")}
# Optional Secrets whose absence is a supported setup, not a missed step: without registry
# credentials the controller pulls policies anonymously (docs/policy-authoring.md).
MAY_BE_ABSENT = {"switchyard-registry"}


class Steps:
    def __init__(self):
        self.objects = {}  # (kind lower, namespace, name) -> doc
        self.crds = set()  # kinds served
        self.namespaces = {"default", "kube-system"}
        self.vars = {}
        self.emitted = []
        self.errors = []

    def fail(self, line, message):
        self.errors.append(f"README step `{line}`: {message}")

    def exists(self, kind, namespace, name):
        return (kind.lower(), namespace, name) in self.objects

    def add(self, doc, line, step_docs):
        kind = doc["kind"]
        name = doc["metadata"]["name"]
        namespace = None if kind in CLUSTER_SCOPED else doc["metadata"].get("namespace", "default")
        same_step_namespaces = {d["metadata"]["name"] for d in step_docs if d["kind"] == "Namespace"}
        if namespace and namespace not in self.namespaces | same_step_namespaces:
            self.fail(line, f"{kind} {namespace}/{name}: namespace {namespace} does not exist yet")
        group = doc["apiVersion"].rpartition("/")[0]
        if group not in BUILT_IN_GROUPS and kind not in self.crds:
            self.fail(line, f"{kind} {name}: no CRD serves it yet (apply the CRD in an earlier step)")
        self.objects[(kind.lower(), namespace, name)] = doc
        if kind == "Namespace":
            self.namespaces.add(name)
        if kind == "CustomResourceDefinition":
            self.pending_crds.add(doc["spec"]["names"]["kind"])

    def check_workload(self, doc, line):
        """What the pods of a Deployment need when they start."""
        namespace = doc["metadata"].get("namespace", "default")
        spec = doc["spec"]["template"]["spec"]
        account = spec.get("serviceAccountName")
        if account and not self.exists("ServiceAccount", namespace, account):
            self.fail(line, f"service account {namespace}/{account} does not exist")
        for volume in spec.get("volumes", []):
            if "configMap" in volume and not self.exists("ConfigMap", namespace, volume["configMap"]["name"]):
                self.fail(line, f"ConfigMap {volume['configMap']['name']} does not exist")
            secret = volume.get("secret")
            if secret and secret.get("optional") and secret["secretName"] in MAY_BE_ABSENT:
                continue
            if secret and not self.exists("Secret", namespace, secret["secretName"]):
                self.fail(line, f"Secret {volume['secret']['secretName']} does not exist when the pods start "
                                "(they would run without it)")

    def check_job_claims(self, doc, line):
        namespace = doc["metadata"].get("namespace", "default")
        for role in doc["spec"]["roles"]:
            for volume in role["template"].get("spec", {}).get("volumes", []):
                claim = volume.get("persistentVolumeClaim", {}).get("claimName")
                if claim and not self.exists("PersistentVolumeClaim", namespace, claim):
                    self.fail(line, f"TrainingJob {doc['metadata']['name']}: claim {claim} does not exist")

    def apply(self, paths, line):
        docs = []
        for path in paths:
            with open(path) as f:
                docs += [d for d in yaml.safe_load_all(f) if d]
        self.pending_crds = set()
        # kubectl apply -k sorts namespaces and CRDs first; -f keeps the file's order.
        for doc in docs:
            self.add(doc, line, docs)
        for doc in docs:
            if doc["kind"] == "Deployment":
                self.check_workload(doc, line)
            if doc["kind"] == "TrainingJob":
                self.check_job_claims(doc, line)
            if doc["apiVersion"].rpartition("/")[0] in BUILT_IN_GROUPS:
                self.emitted.append(doc)
        self.crds |= self.pending_crds

    def run(self, line):
        words = [os.path.expandvars(w) for w in shlex.split(line, comments=True)]
        if not words:
            return
        if re.fullmatch(r"[A-Z_]+=.*", words[0]) and len(words) == 1:
            name, value = words[0].split("=", 1)
            if not value.startswith("$("):
                os.environ[name] = value
            return
        if words[0] in ("docker", "kind", "curl", "sleep") or re.fullmatch(r"[A-Z_]+=.*", words[0]):
            if words[0] == "docker" and words[1] == "build" and not os.path.exists("Dockerfile"):
                self.fail(line, "no Dockerfile")
            return
        if words[0] != "kubectl":
            self.fail(line, "a command this check does not know; teach it")
            return
        verb = words[1]
        namespace = words[words.index("-n") + 1] if "-n" in words else "default"
        if verb == "apply" and "-f" in words:
            self.apply([words[words.index("-f") + 1]], line)
        elif verb == "apply" and "-k" in words:
            directory = words[words.index("-k") + 1]
            with open(os.path.join(directory, "kustomization.yaml")) as f:
                kustomization = yaml.safe_load(f)
            self.apply([os.path.join(directory, r) for r in kustomization["resources"]], line)
        elif verb == "create" and words[2] == "namespace":
            doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": words[3]}}
            self.pending_crds = set()
            self.add(doc, line, [doc])
            self.emitted.append(doc)
        elif verb == "create" and words[2] == "secret":
            name = words[4]
            literals = {w.split("=", 1)[1].split("=", 1)[0]: "x" for w in words if w.startswith("--from-literal=")}
            doc = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": name, "namespace": namespace}, "stringData": literals}
            self.pending_crds = set()
            self.add(doc, line, [doc])
            self.emitted.append(doc)
        elif verb in ("set", "rollout"):
            target = next(w for w in words[2:] if w.startswith("deployment/"))
            name = target.split("/", 1)[1]
            deployment = self.objects.get(("deployment", namespace, name))
            if deployment is None:
                self.fail(line, f"Deployment {namespace}/{name} does not exist")
            elif verb == "set":
                container = words[words.index(target) + 1].split("=", 1)[0]
                names = [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]]
                if container not in names:
                    self.fail(line, f"Deployment {name} has no container {container} ({names})")
        elif verb in ("get", "events", "port-forward"):
            refs = [w for w in words[2:] if "/" in w and not w.startswith("-")] if verb != "get" else []
            if verb == "get" and len(words) > 3 and not words[3].startswith("-"):
                refs = [f"{words[2]}/{words[3]}"]
            for ref in refs:
                kind, name = ref.split("/", 1)
                kind = {"svc": "service", "deploy": "deployment"}.get(kind, kind)
                kind = kind.rstrip("s") if kind.endswith("s") and kind != "leases" else kind.rstrip("s")
                if "$" in name or (kind, namespace, name) in CREATED_BY_THE_CONTROLLER:
                    continue
                if not any(k == kind and n == name for (k, _ns, n) in self.objects):
                    self.fail(line, f"{kind} {name} does not exist")
        else:
            self.fail(line, "a kubectl command this check does not know; teach it")


def install_block(readme):
    section = readme.split("## Running in a Kubernetes cluster", 1)[1]
    # The fence may carry a mark for the docs test (```sh docs-skip).
    block = re.search(r"```sh[^\n]*\n(.*?)\n```", section, re.S).group(1)
    return block.replace("\\\n", " ").splitlines()


def main():
    readme_path, out_path = sys.argv[1:]
    with open(readme_path) as f:
        lines = install_block(f.read())
    steps = Steps()
    for line in lines:
        for command in line.split(" & "):
            steps.run(command.strip())
    with open(out_path, "w") as f:
        yaml.safe_dump_all(steps.emitted, f)
    for error in steps.errors:
        print(f"ERROR {error}")
    if not steps.errors:
        print(f"INFO the README's {len([l for l in lines if l and not l.startswith('#')])} install "
              f"commands run in order against the manifests")
    return 1 if steps.errors else 0


if __name__ == "__main__":
    sys.exit(main())
