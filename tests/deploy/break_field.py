"""Writes a copy of a manifest with one field set to a value of the wrong type (or one
field added that no schema knows), so that validate.sh can show its validators refuse it.

usage: break_field.py SRC.yaml DEST.yaml KIND FIELD VALUE

FIELD is a dotted path in the document of kind KIND (`spec.parallelism`,
`spec.pytorchReplicaSpecs.Worker.replicas`); VALUE is YAML (`eight`, `"8"`). Every
field on the path but the last must exist, so a path mistyped here fails rather than
break nothing.
"""
import sys

import yaml


def main() -> int:
    src, dest, kind, field, value = sys.argv[1:]
    with open(src) as f:
        docs = [doc for doc in yaml.safe_load_all(f) if doc]
    targets = [doc for doc in docs if doc["kind"] == kind]
    if len(targets) != 1:
        sys.exit(f"ERROR {src}: {len(targets)} documents of kind {kind}, where one is expected")
    node = targets[0]
    *parents, last = field.split(".")
    for key in parents:
        if key not in node:
            sys.exit(f"ERROR {src}: {kind} has no {field} (no `{key}`)")
        node = node[key]
    node[last] = yaml.safe_load(value)
    with open(dest, "w") as f:
        yaml.safe_dump_all(docs, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
