"""Checks what enabling the integrations in deploy/integrations/ does to the install.

usage: check_integrations.py BASE.yaml KIND=RENDERED.yaml... ALL.yaml

BASE.yaml is deploy/ rendered alone, each KIND=RENDERED.yaml deploy/ with the component
deploy/integrations/KIND, ALL.yaml deploy/ with every component. Checked:

- the base grants no eviction and passes no `--integrations`: adoption is off until an
  integration is enabled;
- a component adds `--integrations=KIND` to the controller's arguments and changes
  nothing else in the Deployment, and several components add one flag each;
- a component's ClusterRole reads exactly one owner resource (get, list, watch) and may
  create pods/eviction, and at most patch that owner's own `scale` subresource (the one
  write to an owner: an elastic job's replicas, as an autoscaler sets them), nothing
  else, and is bound to the controller's ServiceAccount as deploy/rbac.yaml names it.
"""
import sys

import yaml

READ = {"get", "list", "watch"}
EVICTION = {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}


def load(path):
    with open(path) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def one(docs, kind, name):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    if len(found) != 1:
        raise SystemExit(f"ERROR {len(found)} {kind} named {name}, where one is expected")
    return found[0]


def controller(docs):
    deployment = one(docs, "Deployment", "switchyard")
    return deployment, next(c for c in deployment["spec"]["template"]["spec"]["containers"]
                            if c["name"] == "controller")


def rules(docs):
    return [rule for d in docs if d["kind"] in ("ClusterRole", "Role") for rule in d["rules"]]


def main() -> int:
    base_path, *rest = sys.argv[1:]
    all_path = rest.pop()
    errors = []
    base = load(base_path)
    base_deployment, base_controller = controller(base)
    account = one(base, "ServiceAccount", "switchyard")["metadata"]
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    if any("pods/eviction" in rule["resources"] for rule in rules(base)):
        errors.append(f"{base_path}: the base grants pods/eviction; only an integration may")
    if any(a.startswith("--integrations") for a in base_controller["args"]):
        errors.append(f"{base_path}: the base passes --integrations; adoption must be opt-in")
    kinds = []
    for entry in rest:
        kind, path = entry.split("=", 1)
        kinds.append(kind)
        docs = load(path)
        deployment, container = controller(docs)
        expected = base_controller["args"] + [f"--integrations={kind}"]
        if container["args"] != expected:
            errors.append(f"{path}: controller args {container['args']}, expected {expected}")
        container = dict(container, args=base_controller["args"])
        containers = [container if c["name"] == "controller" else c
                      for c in deployment["spec"]["template"]["spec"]["containers"]]
        unchanged = yaml.safe_load(yaml.safe_dump(deployment))
        unchanged["spec"]["template"]["spec"]["containers"] = containers
        if unchanged != base_deployment:
            errors.append(f"{path}: the component changes the Deployment beyond its argument")
        role = one(docs, "ClusterRole", f"switchyard-integration-{kind}")
        scales = [r for r in role["rules"] if any(x.endswith("/scale") for x in r["resources"])]
        owners = [r for r in role["rules"] if r != EVICTION and r not in scales]
        for scale in scales:
            owner = owners[0] if len(owners) == 1 else {"apiGroups": [], "resources": []}
            expected_scale = {"apiGroups": owner["apiGroups"],
                              "resources": [f"{r}/scale" for r in owner["resources"]],
                              "verbs": ["patch"]}
            if scale != expected_scale:
                errors.append(f"{path}: ClusterRole switchyard-integration-{kind} may only patch "
                              f"its owner's scale subresource ({expected_scale}); it has {scale}")
        if len(owners) != 1 or len(owners[0]["resources"]) != 1 or set(owners[0]["verbs"]) != READ:
            errors.append(f"{path}: ClusterRole switchyard-integration-{kind} must read one owner "
                          f"resource (get, list, watch) and nothing else besides evictions; it has {owners}")
        if any(r["apiGroups"] == [""] and set(r["resources"]) & {"pods", "events"} for r in owners):
            errors.append(f"{path}: pods and events are the base role's, not {kind}'s")
        binding = one(docs, "ClusterRoleBinding", f"switchyard-integration-{kind}")
        if binding["roleRef"]["name"] != role["metadata"]["name"] or binding["subjects"] != [subject]:
            errors.append(f"{path}: ClusterRoleBinding switchyard-integration-{kind} must bind its "
                          f"role to {subject}, not {binding['roleRef']} to {binding['subjects']}")
        base_names = {(d["kind"], d["metadata"]["name"]) for d in base}
        added = {(d["kind"], d["metadata"]["name"]) for d in docs} - base_names
        expected_added = {("ClusterRole", f"switchyard-integration-{kind}"),
                          ("ClusterRoleBinding", f"switchyard-integration-{kind}")}
        if added != expected_added:
            errors.append(f"{path}: adds {sorted(added)}, expected {sorted(expected_added)}")
        if not errors:
            print(f"INFO deploy/integrations/{kind}: --integrations={kind}, reads "
                  f"{owners[0]['apiGroups'][0] or 'core'}/{owners[0]['resources'][0]}, evicts pods"
                  + (", scales the owner" if scales else ""))
    _, every = controller(load(all_path))
    expected = base_controller["args"] + [f"--integrations={kind}" for kind in kinds]
    if every["args"] != expected:
        errors.append(f"{all_path}: controller args {every['args']}, expected {expected}")
    for error in errors:
        print(f"ERROR {error}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
