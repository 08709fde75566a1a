"""The rules that differ for the rdma overlay (deploy/k8s/overlays/rdma): the namespace's Pod
Security level, added capabilities, the host's RDMA devices and UCX_NET_DEVICES.

cpu and gpu: the namespace enforces the restricted Pod Security Standard and no container adds
a capability. rdma: the namespace enforces privileged (restricted forbids any added capability
and baseline's allowed set lacks IPC_LOCK), the worker container adds IPC_LOCK and nothing
else, and requests and limits an RDMA device-plugin resource (`rdma/...`). Everywhere:
UCX_NET_DEVICES is the user's to set, so no container's `env` sets it; the rdma overlay gives a
default through `envFrom` a rendered ConfigMap, which an `env` entry of the user overrides.

Each check appends messages naming the object to `errors`.
"""
import posixpath

from .manifests import containers_of, describe, dig, items

RDMA_CAPABILITY = "IPC_LOCK"
RDMA_RESOURCE_PREFIX = "rdma/"
UCX_NET_DEVICES = "UCX_NET_DEVICES"
_LEVEL_LABEL = "pod-security.kubernetes.io/enforce"
WORKER_BINARY = "retort-worker"


def _is_worker(container):
    command = items(container.get("command"))
    return bool(command) and posixpath.basename(str(command[0])) == WORKER_BINARY


def allowed_capabilities(accelerator, container):
    """The capabilities `container` may add in an overlay for `accelerator`."""
    return {RDMA_CAPABILITY} if accelerator == "rdma" and _is_worker(container) else set()


def check_pod_security_level(objects, accelerator, errors):
    """The Namespace enforces restricted, or privileged in the rdma overlay."""
    wanted = "privileged" if accelerator == "rdma" else "restricted"
    for obj in objects:
        if obj.get("kind") != "Namespace":
            continue
        level = dig(obj, "metadata", "labels", _LEVEL_LABEL)
        if level != wanted:
            errors.append(f"{describe(obj)}: label {_LEVEL_LABEL} must be {wanted} (is {level})")


def _rdma_resources(container):
    return {kind: {k: v for k, v in (dig(container, "resources", kind) or {}).items()
                   if str(k).startswith(RDMA_RESOURCE_PREFIX)}
            for kind in ("requests", "limits")}


def _ucx_config_maps(objects, container):
    """Names of the ConfigMaps the container's envFrom reads that hold UCX_NET_DEVICES."""
    found = []
    for source in items(container.get("envFrom")):
        name = dig(source, "configMapRef", "name")
        config_map = next((o for o in objects if o.get("kind") == "ConfigMap"
                           and dig(o, "metadata", "name") == name), None)
        if config_map is not None and UCX_NET_DEVICES in (dig(config_map, "data") or {}):
            found.append(name)
    return found


def check_rdma(objects, accelerator, workers, errors):
    """UCX_NET_DEVICES left to the user everywhere; the worker's RDMA devices and capability
    in the rdma overlay and none elsewhere. `workers` is the worker Job (or None)."""
    for obj in objects:
        for container in containers_of(obj):
            if any(dig(e, "name") == UCX_NET_DEVICES for e in items(container.get("env"))):
                errors.append(f"{describe(obj)} container {container.get('name')}: env sets "
                              f"{UCX_NET_DEVICES}; it is the user's (a default goes in envFrom)")
    if workers is None:
        return
    name = describe(workers)
    container = next((c for c in containers_of(workers) if _is_worker(c)), {})
    resources = _rdma_resources(container)
    added = set(map(str, items(dig(container, "securityContext", "capabilities", "add"))))
    ucx = _ucx_config_maps(objects, container)
    if accelerator != "rdma":
        if resources["requests"] or resources["limits"] or ucx:
            errors.append(f"{name}: RDMA devices or UCX settings outside the rdma overlay")
        return
    if not resources["limits"] or resources["requests"] != resources["limits"]:
        errors.append(f"{name}: must request and limit an RDMA device-plugin resource ({RDMA_RESOURCE_PREFIX}...)")
    if RDMA_CAPABILITY not in added:
        errors.append(f"{name}: the worker must add {RDMA_CAPABILITY} (pinning memory for RDMA)")
    if not ucx:
        errors.append(f"{name}: needs a default {UCX_NET_DEVICES} from envFrom a rendered ConfigMap")
