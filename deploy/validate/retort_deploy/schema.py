"""Validation of Kubernetes objects against the API schemas of one Kubernetes version, strict.

The schemas are the JSON schemas bundled (offline) with the PyPI package kubernetes-validate,
in their strict form: an unknown field at any depth is an error (as with `kubectl apply
--validate=strict`), besides wrong types, missing required fields and enum values. Unlike the
package's own command line this reports every problem of an object, not the first, and fails
on a kind the version does not know instead of warning.
"""
import re

import jsonschema
from referencing import Registry, Resource
from kubernetes_validate import utils as kv

from .manifests import describe

# The Kubernetes version the manifests must be valid for: the oldest the deployment supports
# (deploy/README.md, "Prerequisites"). The one place this version is named.
KUBERNETES_VERSION = "1.28"

_validators = {}


def _schema_dir(version):
    """Folder (inside kubernetes_validate) of the strict schemas for `version` (major.minor)."""
    bundled = [v for v in kv.all_versions() if kv.major_minor(v) == version]
    if not bundled:
        raise ValueError(f"kubernetes-validate {kv.__version__} has no schemas for Kubernetes {version}")
    return f"kubernetes-json-schema/v{bundled[-1]}-local-strict"


def _validator(api_version, kind, version):
    """A jsonschema validator for one apiVersion/kind, or None when the version lacks the kind."""
    key = (api_version, kind, version)
    if key not in _validators:
        folder = _schema_dir(version)
        # apps/v1 -> apps-v1, rbac.authorization.k8s.io/v1 -> rbac-v1, v1 -> v1 (the package's names).
        group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        try:
            schema = kv.schema_contents(f"{folder}/{kind.lower()}-{group_version}.json", version)
        except FileNotFoundError:
            _validators[key] = None
            return None
        definitions = kv.schema_contents(f"{folder}/_definitions.json", version)
        # The object schema refers to the definitions by their $id (/api/_definitions.json).
        registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
        _validators[key] = jsonschema.Draft202012Validator(schema, registry=registry)
    return _validators[key]


def _where(path):
    """JSON path of an error as `spec.containers[0].env`."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else f".{step}"
    return text.lstrip(".") or "."


def _messages(error):
    """Messages for one jsonschema error; an unknown-field error names each unknown field."""
    where = _where(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = set(error.schema.get("properties", {}))
        patterns = list(error.schema.get("patternProperties", {}))
        unknown = [
            k for k in error.instance if k not in known and not any(re.search(p, k) for p in patterns)
        ]
        return [f'{where}: unknown field "{k}"' for k in unknown]
    return [f"{where}: {error.message}"]


def validate_object(obj, version=KUBERNETES_VERSION):
    """Messages for every schema problem of one object (empty when it is valid)."""
    name = describe(obj)
    if not isinstance(obj, dict):
        return [f"{name}: not a mapping"]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return [f"{name}: apiVersion and kind must be strings"]
    validator = _validator(api_version, kind, version)
    if validator is None:
        return [f"{name}: {api_version} {kind} is not a known kind in Kubernetes {version}"]
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{name}: {m}" for e in errors for m in _messages(e)]
