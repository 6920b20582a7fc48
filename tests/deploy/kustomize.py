"""Renders a kustomization as `kubectl kustomize DIR` does, for the part of kustomize that
deploy/ uses, where no kubectl is installed.

usage: kustomize.py DIR [OUT.yaml]

What is rendered: `resources` (files, and directories holding a kustomization), then
`components` (directories holding a `kind: Component`, whose resources are added and
whose patches then apply to everything accumulated), then the kustomization's own
`patches`. A patch is a JSON 6902 list of operations (inline `patch` or a `path` file)
applied to every object its `target` selects (group, version, kind, name, namespace).
Anything else kustomize offers (generators, strategic merge patches, name prefixes,
images, ...) is refused with the file and the key at fault, never ignored, so a
kustomization this does not understand fails here rather than render differently from
kubectl. Paths must be relative and stay relative, as kustomize's own rule wants.
Where kubectl is installed, validate.sh also compares the two renderings.
"""
import os
import sys

import jsonpatch
import yaml

KUSTOMIZATION_KEYS = {"apiVersion", "kind", "resources", "components", "patches"}
PATCH_KEYS = {"target", "patch", "path"}
TARGET_KEYS = {"group", "version", "kind", "name", "namespace"}


class RenderError(Exception):
    pass


def load_kustomization(directory, expected_kind):
    path = os.path.join(directory, "kustomization.yaml")
    if not os.path.isfile(path):
        raise RenderError(f"{directory}: no kustomization.yaml")
    with open(path) as f:
        kustomization = yaml.safe_load(f) or {}
    kind = kustomization.get("kind", "Kustomization")
    if kind != expected_kind:
        raise RenderError(f"{path}: kind {kind}, where a {expected_kind} is expected")
    unknown = set(kustomization) - KUSTOMIZATION_KEYS
    if unknown:
        raise RenderError(f"{path}: {', '.join(sorted(unknown))} not understood here "
                          f"(understood: {', '.join(sorted(KUSTOMIZATION_KEYS))})")
    return path, kustomization


def relative(directory, entry, path):
    if not isinstance(entry, str) or os.path.isabs(entry) or "://" in entry:
        raise RenderError(f"{path}: `{entry}` is not a relative path (remote and absolute "
                          "ones are not rendered here)")
    resolved = os.path.normpath(os.path.join(directory, entry))
    if not os.path.exists(resolved):
        raise RenderError(f"{path}: `{entry}` does not exist ({resolved})")
    return resolved


def selects(target, doc):
    group, _, version = doc["apiVersion"].rpartition("/")
    metadata = doc.get("metadata", {})
    have = {"group": group, "version": version, "kind": doc["kind"],
            "name": metadata.get("name"), "namespace": metadata.get("namespace")}
    return all(have[key] == value for key, value in target.items())


def apply_patches(directory, path, patches, objects):
    for entry in patches:
        unknown = set(entry) - PATCH_KEYS
        target = entry.get("target", {})
        if unknown or set(target) - TARGET_KEYS or ("patch" in entry) == ("path" in entry):
            raise RenderError(f"{path}: patch {entry} not understood here (a `target` of "
                              f"{sorted(TARGET_KEYS)} and one of `patch` or `path`)")
        if "path" in entry:
            with open(relative(directory, entry["path"], path)) as f:
                operations = yaml.safe_load(f)
        else:
            operations = yaml.safe_load(entry["patch"])
        if not isinstance(operations, list):
            raise RenderError(f"{path}: patch on {target} is not a JSON 6902 list of "
                              "operations (strategic merge patches are not understood here)")
        selected = [i for i, doc in enumerate(objects) if selects(target, doc)]
        if not selected:
            raise RenderError(f"{path}: patch target {target} selects no object")
        for i in selected:
            try:
                objects[i] = jsonpatch.apply_patch(objects[i], operations)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
                raise RenderError(f"{path}: patch on {target}: {error}") from error


def render(directory, expected_kind="Kustomization", objects=None):
    path, kustomization = load_kustomization(directory, expected_kind)
    objects = [] if objects is None else objects
    for entry in kustomization.get("resources", []):
        resource = relative(directory, entry, path)
        if os.path.isdir(resource):
            objects.extend(render(resource))
        else:
            with open(resource) as f:
                for doc in yaml.safe_load_all(f):
                    if not doc:
                        continue
                    if not (isinstance(doc, dict) and isinstance(doc.get("apiVersion"), str)
                            and isinstance(doc.get("kind"), str)
                            and isinstance(doc.get("metadata", {}).get("name"), str)):
                        raise RenderError(f"{resource}: a document without apiVersion, kind "
                                          "and metadata.name")
                    objects.append(doc)
    for entry in kustomization.get("components", []):
        objects = render(relative(directory, entry, path), "Component", objects)
    apply_patches(directory, path, kustomization.get("patches", []), objects)
    seen = set()
    for doc in objects:
        key = (doc["apiVersion"], doc["kind"], doc["metadata"].get("namespace"), doc["metadata"]["name"])
        if key in seen:
            raise RenderError(f"{path}: {key} is defined twice")
        seen.add(key)
    return objects


def main() -> int:
    directory, *out = sys.argv[1:]
    try:
        objects = render(directory)
    except RenderError as error:
        print(f"ERROR {error}")
        return 1
    text = yaml.safe_dump_all(objects, sort_keys=True)
    if out:
        with open(out[0], "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
