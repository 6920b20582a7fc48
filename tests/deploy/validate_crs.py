"""Validates custom resources against the OpenAPI v3 schema of a CRD (the one generated
from the Rust types, or a published one under tests/crds/).

usage: validate_crs.py CRD.yaml RESOURCE.yaml...

The API server validates a custom resource against `spec.versions[].schema.openAPIV3Schema`;
this does the same with jsonschema. A field the schema does not know is an error, as
`kubectl apply` (strict field validation, its default) makes it, except under
`x-kubernetes-preserve-unknown-fields`; the other `x-kubernetes-*` extensions (CEL rules,
list types) are not checked here.
"""
import sys

import jsonschema
import yaml


def strict(schema):
    """`schema` with unknown fields refused wherever the API server would prune them."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    schema = {key: strict(value) for key, value in schema.items()}
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        schema["additionalProperties"] = False
    return schema


def with_type_meta(schema):
    """The root schema with the fields the API server serves on every object, which a
    generated schema may leave out."""
    properties = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                  "metadata": {"type": "object"}}
    properties.update(schema.get("properties", {}))
    return {**schema, "properties": properties}


def main() -> int:
    crd_path, *paths = sys.argv[1:]
    with open(crd_path) as f:
        crd = yaml.safe_load(f)
    group = crd["spec"]["group"]
    kind = crd["spec"]["names"]["kind"]
    schemas = {f"{group}/{v['name']}": strict(with_type_meta(v["schema"]["openAPIV3Schema"]))
               for v in crd["spec"]["versions"]}
    failures = 0
    for path in paths:
        with open(path) as f:
            docs = [doc for doc in yaml.safe_load_all(f) if doc]
        if not any(doc.get("kind") == kind for doc in docs):
            print(f"ERROR {path}: no {kind} in it, so nothing was checked against {crd_path}")
            failures += 1
        for doc in docs:
            if doc.get("kind") != kind:
                continue
            schema = schemas.get(doc.get("apiVersion"))
            name = doc.get("metadata", {}).get("name")
            if schema is None:
                print(f"ERROR {path}: {kind} {name}: apiVersion {doc.get('apiVersion')} is not served by the CRD")
                failures += 1
                continue
            errors = list(jsonschema.Draft7Validator(schema).iter_errors(doc))
            for error in errors:
                where = "/".join(str(p) for p in error.absolute_path)
                print(f"ERROR {path}: {kind} {name}: {where}: {error.message}")
            failures += len(errors)
            if not errors:
                print(f"INFO {path} passed against the CRD schema of {crd_path} ({kind} {name})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
