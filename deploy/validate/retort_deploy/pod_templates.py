"""What Kubernetes would make of a Job's pod template, computed without a cluster: the pods the
Job controller creates and the environment and command line the kubelet gives each container.

- pods_of_job(): one PodInstance per pod the Job starts at once (parallelism); for an Indexed
  Job, pod i gets the completion index i as the annotation and label
  batch.kubernetes.io/job-completion-index, the env variable JOB_COMPLETION_INDEX (unless the
  container declares it), and the hostname <job name>-<i>, as the Job controller does.
- container_env(): the container's env, in order: envFrom ConfigMaps first, then `env` entries
  (which win), each `value` with $(VAR) expanded against the variables before it, each
  fieldRef from the pod (namespace, name, node, pod IP, annotations, labels, service account),
  each configMapKeyRef from the rendered ConfigMaps. A secretKeyRef or an unknown field path
  raises PodTemplateError (the manifests mount secrets as files).
- expand(): $(VAR) in a command or argument, as the kubelet expands it: a defined VAR is
  replaced, $$ is a literal $, anything else is kept as written.

Pure functions over plain values (the parsed YAML); no I/O.
"""
import re
from dataclasses import dataclass, field

from .manifests import dig, items

COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
_REF_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_KEYED_FIELD_RE = re.compile(r"^metadata\.(annotations|labels)\['([^']+)'\]$")


class PodTemplateError(Exception):
    """A pod template that this emulation cannot run; the message says what and where."""


@dataclass
class PodInstance:
    """One pod of a Job: its identity and its template's pod spec (shared, do not modify)."""
    job: str
    name: str
    namespace: str
    index: int
    spec: dict
    labels: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)
    hostname: str = ""
    node: str = ""
    ip: str = ""


def expand(text, env):
    """`text` with $(VAR) replaced by env[VAR] where VAR is defined, $$ turned into $."""
    def substitute(match):
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)
    return _REF_RE.sub(substitute, str(text))


def pods_of_job(job, namespace):
    """The pods a Job runs at once: `parallelism` of them (indexes 0..parallelism-1 for an
    Indexed Job), each with the template's labels and annotations plus the Job controller's."""
    spec = dig(job, "spec", default={})
    name = dig(job, "metadata", "name")
    template = dig(spec, "template", default={})
    parallelism = spec.get("parallelism", 1)
    indexed = spec.get("completionMode") == "Indexed"
    pods = []
    for index in range(parallelism):
        labels = dict(dig(template, "metadata", "labels", default={}))
        annotations = dict(dig(template, "metadata", "annotations", default={}))
        pod_name = f"{name}-{index}" if indexed else f"{name}-{index}-emulated"
        hostname = dig(template, "spec", "hostname", default="")
        if indexed:
            labels[COMPLETION_INDEX_KEY] = str(index)
            annotations[COMPLETION_INDEX_KEY] = str(index)
            hostname = hostname or f"{name}-{index}"
        pods.append(PodInstance(job=name, name=pod_name, namespace=namespace, index=index,
                                spec=dig(template, "spec", default={}), labels=labels,
                                annotations=annotations, hostname=hostname or pod_name))
    return pods


def _field(pod, path):
    simple = {
        "metadata.name": pod.name,
        "metadata.namespace": pod.namespace,
        "spec.nodeName": pod.node,
        "status.podIP": pod.ip,
        "status.podIPs": pod.ip,
        "spec.serviceAccountName": pod.spec.get("serviceAccountName", "default"),
    }
    if path in simple:
        return simple[path]
    keyed = _KEYED_FIELD_RE.match(path)
    if keyed:
        values = pod.annotations if keyed.group(1) == "annotations" else pod.labels
        if keyed.group(2) in values:
            return values[keyed.group(2)]
    raise PodTemplateError(f"pod {pod.name}: fieldRef {path} has no value in this emulation")


def _config_map(config_maps, name, pod):
    if name not in config_maps:
        raise PodTemplateError(f"pod {pod.name}: ConfigMap {name} is not in the manifests")
    return config_maps[name]


def container_env(pod, container, config_maps):
    """The container's environment as the kubelet builds it (see the module doc).
    `config_maps` maps a ConfigMap's name to its data."""
    env = {}
    for source in items(container.get("envFrom")):
        ref = dig(source, "configMapRef", "name")
        if ref is None:
            raise PodTemplateError(f"pod {pod.name}: envFrom other than configMapRef")
        env.update({str(k): str(v) for k, v in _config_map(config_maps, ref, pod).items()})
    declared = set()
    for entry in items(container.get("env")):
        name = entry.get("name")
        declared.add(name)
        if "value" in entry:
            env[name] = expand(entry["value"], env)
        elif dig(entry, "valueFrom", "fieldRef") is not None:
            env[name] = _field(pod, dig(entry, "valueFrom", "fieldRef", "fieldPath"))
        elif dig(entry, "valueFrom", "configMapKeyRef") is not None:
            ref = dig(entry, "valueFrom", "configMapKeyRef")
            data = _config_map(config_maps, ref.get("name"), pod)
            if ref.get("key") in data:
                env[name] = str(data[ref["key"]])
            elif not ref.get("optional"):
                raise PodTemplateError(f"pod {pod.name}: ConfigMap {ref.get('name')} has no key {ref.get('key')}")
        else:
            raise PodTemplateError(f"pod {pod.name}: env {name} comes from an unsupported source "
                                   "(secrets are mounted as files)")
    if COMPLETION_INDEX_KEY in pod.annotations and COMPLETION_INDEX_ENV not in declared:
        env[COMPLETION_INDEX_ENV] = pod.annotations[COMPLETION_INDEX_KEY]
    return env


def command_line(container, env):
    """The container's command and args with $(VAR) expanded."""
    return [expand(a, env) for a in items(container.get("command")) + items(container.get("args"))]
