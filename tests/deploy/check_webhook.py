"""Checks what enabling the pod webhook (deploy/webhook/) does to the install, and that
its pieces name each other.

usage: check_webhook.py BASE.yaml WEBHOOK.yaml

BASE.yaml is deploy/ rendered alone, WEBHOOK.yaml deploy/ with the component. Checked:

- the base serves no webhook: no `--webhook-cert-dir`, no MutatingWebhookConfiguration;
- the component adds to the controller `--webhook-cert-dir=DIR`, a port named `webhook`,
  and the certificate's Secret mounted read-only at DIR, and changes nothing else in the
  Deployment;
- the Certificate's Secret is the one mounted, and its DNS names hold the webhook
  Service's `<name>.<namespace>.svc`;
- the Service selects every replica (not only the leader) and sends its port to the
  container's `webhook` port;
- the MutatingWebhookConfiguration calls that Service on that port, takes its CA from
  that Certificate (`cert-manager.io/inject-ca-from`), sees only pods being created that
  carry the queue label, outside kube-system and the controller's namespace, with
  admission.k8s.io/v1, no side effects, and a failure policy and timeout set.
"""
import sys

import yaml

QUEUE_LABEL = "switchyard.dev/queue"


def load(path):
    with open(path) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def one(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    if len(found) != 1:
        raise SystemExit(f"ERROR {len(found)} {kind} named {name}, where one is expected")
    return found[0]


def controller(docs):
    deployment = one(docs, "Deployment", "switchyard")
    return deployment, deployment["spec"]["template"]["spec"]["containers"][0]


def main() -> int:
    base_path, path = sys.argv[1:]
    errors = []
    base, docs = load(base_path), load(path)
    base_deployment, base_controller = controller(base)
    if any(a.startswith("--webhook") for a in base_controller["args"]):
        errors.append(f"{base_path}: the base passes a --webhook flag; the webhook must be opt-in")
    if any(d["kind"] == "MutatingWebhookConfiguration" for d in base):
        errors.append(f"{base_path}: the base holds a MutatingWebhookConfiguration")

    deployment, container = controller(docs)
    added = [a for a in container["args"] if a not in base_controller["args"]]
    cert_dir = added[0].split("=", 1)[1] if len(added) == 1 and added[0].startswith("--webhook-cert-dir=") else None
    if cert_dir is None or container["args"] != base_controller["args"] + added:
        errors.append(f"{path}: the component must append one --webhook-cert-dir=DIR; it adds {added}")
    ports = [p for p in container["ports"] if p not in base_controller["ports"]]
    if len(ports) != 1 or ports[0].get("name") != "webhook":
        errors.append(f"{path}: the component must add one container port named webhook; it adds {ports}")
    mounts = [m for m in container["volumeMounts"] if m not in base_controller["volumeMounts"]]
    volumes = [v for v in deployment["spec"]["template"]["spec"]["volumes"]
               if v not in base_deployment["spec"]["template"]["spec"]["volumes"]]
    if (len(mounts) != 1 or len(volumes) != 1 or mounts[0]["mountPath"] != cert_dir
            or not mounts[0].get("readOnly") or mounts[0]["name"] != volumes[0]["name"]
            or "secret" not in volumes[0]):
        errors.append(f"{path}: the component must mount one Secret read-only at {cert_dir}; "
                      f"it mounts {mounts} from {volumes}")
    unchanged = yaml.safe_load(yaml.safe_dump(deployment))
    unchanged_container = unchanged["spec"]["template"]["spec"]["containers"][0]
    for key in ("args", "ports", "volumeMounts"):
        unchanged_container[key] = base_controller[key]
    unchanged["spec"]["template"]["spec"]["volumes"] = base_deployment["spec"]["template"]["spec"]["volumes"]
    if unchanged != base_deployment:
        errors.append(f"{path}: the component changes the Deployment beyond its flag, port and volume")

    certificate = one(docs, "Certificate")
    service = one(docs, "Service", "switchyard-webhook")
    namespace = service["metadata"]["namespace"]
    secret = volumes[0]["secret"]["secretName"] if volumes and "secret" in volumes[0] else None
    if certificate["spec"]["secretName"] != secret:
        errors.append(f"{path}: the Certificate writes Secret {certificate['spec']['secretName']}, "
                      f"the controller mounts {secret}")
    dns = f"{service['metadata']['name']}.{namespace}.svc"
    if dns not in certificate["spec"].get("dnsNames", []):
        errors.append(f"{path}: the Certificate's dnsNames {certificate['spec'].get('dnsNames')} lack {dns}")
    issuer = certificate["spec"]["issuerRef"]
    one(docs, issuer.get("kind", "Issuer"), issuer["name"])
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = service["spec"]["selector"]
    if any(labels.get(k) != v for k, v in selector.items()) or "switchyard.dev/leader" in selector:
        errors.append(f"{path}: Service {dns} must select every replica ({labels}); it selects {selector}")
    service_ports = {p["port"]: p for p in service["spec"]["ports"]}

    configuration = one(docs, "MutatingWebhookConfiguration")
    injected = configuration["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
    if injected != f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}":
        errors.append(f"{path}: inject-ca-from {injected} does not name the Certificate")
    for webhook in configuration["webhooks"]:
        name = webhook["name"]
        called = webhook["clientConfig"]["service"]
        port = service_ports.get(called.get("port", 443))
        if (called["name"], called["namespace"]) != (service["metadata"]["name"], namespace) or port is None \
                or port["targetPort"] != "webhook":
            errors.append(f"{path}: webhook {name} calls {called}, not Service {dns}'s port to the webhook")
        rules = webhook["rules"]
        if rules != [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                      "resources": ["pods"], "scope": "Namespaced"}]:
            errors.append(f"{path}: webhook {name} must see pod creations only; its rules are {rules}")
        if QUEUE_LABEL not in webhook.get("objectSelector", {}).get("matchLabels", {}):
            errors.append(f"{path}: webhook {name} must select pods by {QUEUE_LABEL}")
        excluded = [e for e in webhook.get("namespaceSelector", {}).get("matchExpressions", [])
                    if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn"]
        if not excluded or not {"kube-system", namespace} <= set(excluded[0]["values"]):
            errors.append(f"{path}: webhook {name} must leave kube-system and {namespace} alone")
        if (webhook["admissionReviewVersions"] != ["v1"] or webhook["sideEffects"] != "None"
                or webhook.get("failurePolicy") not in ("Fail", "Ignore")
                or not 1 <= webhook.get("timeoutSeconds", 10) <= 30):
            errors.append(f"{path}: webhook {name} must take admission.k8s.io/v1, have no side "
                          "effects, and set its failure policy and a timeout of at most 30 s")
    for error in errors:
        print(f"ERROR {error}")
    if not errors:
        print(f"INFO deploy/webhook: {dns}:443 -> webhook port, certificate {secret} at {cert_dir}, "
              f"pods of {QUEUE_LABEL}={configuration['webhooks'][0]['objectSelector']['matchLabels'][QUEUE_LABEL]}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
