"""Validates custom resources against the OpenAPI v3 schema of a generated CRD.

usage: validate_crs.py CRD.yaml RESOURCE.yaml...

The API server validates a custom resource against `spec.versions[].schema.openAPIV3Schema`;
this does the same with jsonschema (the Kubernetes extensions `x-kubernetes-*` are
annotations to jsonschema and are ignored, `x-kubernetes-preserve-unknown-fields` being
the default behaviour of JSON Schema for objects without `additionalProperties`).
"""
import sys

import jsonschema
import yaml


def main() -> int:
    crd_path, *paths = sys.argv[1:]
    with open(crd_path) as f:
        crd = yaml.safe_load(f)
    group = crd["spec"]["group"]
    kind = crd["spec"]["names"]["kind"]
    schemas = {f"{group}/{v['name']}": v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"]}
    failures = 0
    for path in paths:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc or doc.get("kind") != kind:
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
                    print(f"INFO {path} passed against the generated CRD schema ({kind} {name})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
