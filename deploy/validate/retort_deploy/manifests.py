"""Reading Kubernetes manifests (multi-document YAML, e.g. `kubectl kustomize` output) and
walking the containers of workload objects. No I/O besides reading the named file."""
from . import yaml12


class ManifestError(Exception):
    """A manifest file that cannot be read or parsed; the message names the file."""


def load_manifests(path):
    """The non-empty documents of a multi-document YAML file, as plain Python values.

    Raises ManifestError naming the file and the parser's message when it is malformed.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        documents = yaml12.load_all(text)
    except (OSError, ValueError, yaml12.yaml.YAMLError) as error:
        raise ManifestError(f"{path}: {error}") from error
    return [d for d in documents if d is not None]


def dig(value, *keys, default=None):
    """value[k1][k2]... following mappings (str keys) and lists (int keys); default when a
    step is missing or of the wrong kind."""
    for key in keys:
        if isinstance(key, int) and isinstance(value, list) and -len(value) <= key < len(value):
            value = value[key]
        elif isinstance(key, str) and isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return default
    return default if value is None else value


def items(value):
    """value when it is a list, else an empty list (for optional list fields)."""
    return value if isinstance(value, list) else []


def describe(obj):
    """'Kind/name' for messages."""
    kind = dig(obj, "kind", default="<no kind>")
    name = dig(obj, "metadata", "name", default="<no name>")
    return f"{kind}/{name}"


_POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def pod_spec_of(obj):
    """The pod (template) spec of a workload object as a dict, or None for other kinds."""
    path = _POD_SPEC_PATHS.get(dig(obj, "kind"))
    if path is None:
        return None
    spec = dig(obj, *path)
    return spec if isinstance(spec, dict) else None


def containers_of(obj):
    """Every container (init containers first) of a workload object; [] for other kinds."""
    spec = pod_spec_of(obj)
    if spec is None:
        return []
    return [c for c in items(spec.get("initContainers")) + items(spec.get("containers")) if isinstance(c, dict)]
