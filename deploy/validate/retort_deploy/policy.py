"""retort's deployment rules, checked on the objects of one rendered overlay.

check_policy() returns messages naming the object and what is wrong; an empty list means the
overlay complies. The rules are those deploy/README.md describes: pod hardening, resources,
native gRPC probes, mutual TLS from Secret volumes with the coordinator's probes on its plaintext
health-only port, the coordinator and worker Jobs (job_rules.py) with the coordinator's state
on a PVC, Services that select the right pods, worker identity from the downward API and the
completion index, graceful termination, ReadWriteMany checkpoint storage mounted by both sides,
no committed Secret, GPU placement (gpu, rdma) or none (cpu), RDMA devices (rdma_rules.py), the
namespace's Pod Security level, and the job spec.
"""
import json
import re

from . import yaml12
from .job_rules import check_coordinator_job, check_worker_job
from .manifests import containers_of, describe, dig, items, pod_spec_of
from .rdma_rules import allowed_capabilities, check_pod_security_level, check_rdma

COORDINATOR = "retort-coordinator"
WORKER = "retort-worker"

_IMAGE_RE = re.compile(r"^[^:@\s]+(:[\w.-]+|@sha256:[0-9a-f]{64})$", re.ASCII)
_VAR_RE = re.compile(r"\$\((\w+)\)", re.ASCII)


# The coordinator health port's readiness service (tools/retort_coordinator_main.cc).
PROGRESS_SERVICE = "retort.v1.TrainingProgress"


def _find(objects, kind, name):
    return next((o for o in objects if o.get("kind") == kind and dig(o, "metadata", "name") == name), None)


def _selects(selector, labels):
    """A non-empty label selector that every label of matches `labels`."""
    if not isinstance(selector, dict) or not selector:
        return False
    labels = labels if isinstance(labels, dict) else {}
    return all(labels.get(k) == v for k, v in selector.items())


def _number(value):
    """value as a number (an int, a float or a numeric string, as Kubernetes quantities are
    written), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _mapping(value):
    """value when it is a mapping, else an empty one."""
    return value if isinstance(value, dict) else {}


def _is(value, expected):
    """value == expected for numbers, with booleans never equal to numbers."""
    return not isinstance(value, bool) and value == expected


def _port(address):
    """The port of 'host:port' (or of a bare port) as an int, or None."""
    text = str(address or "").rsplit(":", 1)[-1]
    return int(text) if text.isdigit() else None


def flag_value(container, name):
    """The value of `--name=value` in a container's args, or None."""
    prefix = f"--{name}="
    for arg in items(container.get("args")):
        if isinstance(arg, str) and arg.startswith(prefix):
            return arg[len(prefix):]
    return None


def _loopback(address):
    """Whether a gRPC listen address is reachable from this host only (as the coordinator's
    coordinator/listen_policy.cc decides)."""
    host = str(address or "").rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def _secured(container):
    """Whether a container is given a TLS certificate and key."""
    return flag_value(container, "tls-cert") is not None and flag_value(container, "tls-key") is not None


def _check_tls_files(obj, container, where, errors):
    """Mutual TLS: --tls-cert, --tls-key and --tls-ca are given, each a file of a mounted
    Secret volume (never a path baked into the image)."""
    for flag in ("tls-cert", "tls-key", "tls-ca"):
        path = flag_value(container, flag)
        if path is None:
            errors.append(f"{where}: needs --{flag} (mutual TLS)")
            continue
        mount = _claim_holding(obj, path)
        if mount is None or dig(mount["volume"], "secret") is None or path == mount["dir"]:
            errors.append(f"{where}: --{flag}={path} is not a file of a mounted Secret volume")


def _env(container, name):
    return next((e for e in items(container.get("env")) if dig(e, "name") == name), None)


def _check_container_security(objects, accelerator, errors):
    for obj in objects:
        spec = pod_spec_of(obj)
        if spec is None:
            continue
        name = describe(obj)
        pod_sc = _mapping(spec.get("securityContext"))
        if spec.get("automountServiceAccountToken") is not False:
            errors.append(f"{name}: automountServiceAccountToken must be false")
        if dig(pod_sc, "seccompProfile", "type") != "RuntimeDefault":
            errors.append(f"{name}: pod securityContext.seccompProfile.type must be RuntimeDefault")
        user = _number(dig(pod_sc, "runAsUser"))
        if not (user is not None and user > 0):
            errors.append(f"{name}: pod securityContext.runAsUser must be non-zero")
        for container in containers_of(obj):
            where = f"{name} container {container.get('name')}"
            sc = _mapping(container.get("securityContext"))
            non_root = sc.get("runAsNonRoot") if sc.get("runAsNonRoot") is not None else pod_sc.get("runAsNonRoot")
            if non_root is not True:
                errors.append(f"{where}: runAsNonRoot must be true")
            if sc.get("allowPrivilegeEscalation") is not False:
                errors.append(f"{where}: allowPrivilegeEscalation must be false")
            if sc.get("readOnlyRootFilesystem") is not True:
                errors.append(f"{where}: readOnlyRootFilesystem must be true")
            if "ALL" not in items(dig(sc, "capabilities", "drop")):
                errors.append(f"{where}: capabilities must drop ALL")
            extra = set(map(str, items(dig(sc, "capabilities", "add")))) - allowed_capabilities(accelerator, container)
            if extra:
                errors.append(f"{where}: adds capabilities {sorted(extra)} (only the rdma overlay's workers add IPC_LOCK)")
            for kind in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if dig(container, "resources", kind, resource) is None:
                        errors.append(f"{where}: resources.{kind}.{resource} missing")
            image = str(container.get("image") or "")
            if not _IMAGE_RE.match(re.sub(r"^[^/]+\.[^/]+/", "x/", image, count=1)):
                errors.append(f'{where}: image "{image}" must carry a tag or digest (set by the overlay)')
            ports = {dig(p, "containerPort") for p in items(container.get("ports"))}
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                port = dig(container, probe, "grpc", "port")
                if port is None:
                    errors.append(f"{where}: {probe} must be a native grpc probe")
                elif port not in ports:
                    errors.append(f"{where}: {probe} port {port} is not a declared containerPort")
            # Kubernetes expands $(VAR) in command/args only for variables defined in env.
            for arg in items(container.get("command")) + items(container.get("args")):
                for var in _VAR_RE.findall(str(arg)):
                    if _env(container, var) is None:
                        errors.append(f'{where}: "{arg}" uses $({var}) but env has no {var}')
            for e in items(container.get("env")):
                if dig(e, "valueFrom", "secretKeyRef") is not None:
                    errors.append(f"{where}: env {e.get('name')} comes from a Secret; mount secrets as files")
    for obj in objects:
        if obj.get("kind") == "Secret":
            errors.append(f"{describe(obj)}: secrets are created by the operator, never committed")


def _check_volume_references(objects, errors):
    """Every PVC and ConfigMap a pod's volumes name is rendered too; Secret volumes are
    optional; every mount names a volume."""
    for obj in objects:
        spec = pod_spec_of(obj)
        if spec is None:
            continue
        name = describe(obj)
        volumes = items(spec.get("volumes"))
        for v in volumes:
            claim = dig(v, "persistentVolumeClaim", "claimName")
            if dig(v, "persistentVolumeClaim") is not None and not _find(objects, "PersistentVolumeClaim", claim):
                errors.append(f"{name}: volume {v.get('name')} claims missing PVC {claim}")
            config_map = dig(v, "configMap", "name")
            if dig(v, "configMap") is not None and not _find(objects, "ConfigMap", config_map):
                errors.append(f"{name}: volume {v.get('name')} uses missing ConfigMap {config_map}")
            # A Secret the binary cannot start without (its --tls-* files) is required, so the
            # pod waits for it; exiting 2 on a missing file would fail the Job at once. Others
            # (tokens, the operator's certificate) are optional.
            if dig(v, "secret") is not None:
                required = v.get("name") in _tls_volumes(obj)
                if required and dig(v, "secret", "optional") is True:
                    errors.append(f"{name}: secret volume {v.get('name')} holds --tls-* files: it must not be "
                                  "optional (the pod waits for it; a missing file would exit 2 and fail the Job)")
                if not required and dig(v, "secret", "optional") is not True:
                    errors.append(f"{name}: secret volume {v.get('name')} must be optional (created by the operator)")
        names = {dig(v, "name") for v in volumes}
        for container in containers_of(obj):
            for m in items(container.get("volumeMounts")):
                if dig(m, "name") not in names:
                    errors.append(f"{name}: mount {dig(m, 'mountPath')} names missing volume {dig(m, 'name')}")


def _tls_volumes(obj):
    """Names of the volumes holding a file that a container's --tls-* flag names."""
    names = set()
    for container in containers_of(obj):
        for flag in ("tls-cert", "tls-key", "tls-ca"):
            mount = _claim_holding(obj, flag_value(container, flag) or "")
            if mount is not None and mount["volume"] is not None:
                names.add(dig(mount["volume"], "name"))
    return names


def _claim_holding(obj, path):
    """The mount with the longest mount path that contains `path`, in any container of a
    workload: {'dir', 'volume', 'read_only'}, or None."""
    volumes = items(dig(pod_spec_of(obj), "volumes"))
    best = None
    for container in containers_of(obj):
        for m in items(container.get("volumeMounts")):
            mount_dir = str(dig(m, "mountPath", default="")).removesuffix("/")
            if (path == mount_dir or path.startswith(f"{mount_dir}/")) and (
                best is None or len(mount_dir) > len(best["dir"])
            ):
                volume = next((v for v in volumes if dig(v, "name") == dig(m, "name")), None)
                best = {"dir": mount_dir, "volume": volume, "read_only": dig(m, "readOnly") is True}
    return best


def _first_container(obj):
    containers = items(dig(obj, "spec", "template", "spec", "containers"))
    return containers[0] if containers and isinstance(containers[0], dict) else {}


def _check_coordinator(objects, errors, context):
    coordinator_job = _find(objects, "Job", COORDINATOR)
    if coordinator_job is None:
        errors.append(f"Job/{COORDINATOR} missing")
        return
    name = describe(coordinator_job)
    container = _first_container(coordinator_job)
    check_coordinator_job(objects, coordinator_job, container, errors)
    service = _find(objects, "Service", COORDINATOR)
    if service is None:
        errors.append(f"Service/{COORDINATOR} missing")
        return
    if not _selects(dig(service, "spec", "selector"), dig(coordinator_job, "spec", "template", "metadata", "labels")):
        errors.append(f"{describe(service)}: selector does not select the coordinator pods")
    listen = flag_value(container, "listen") or ""
    port = _port(listen)
    service_port = next((p for p in items(dig(service, "spec", "ports")) if dig(p, "name") == "grpc"), None)
    if service_port is None:
        errors.append(f"{describe(service)}: needs a port named grpc")
    elif not _is(service_port.get("port"), 7070):
        errors.append(f"{describe(service)}: gRPC port must be 7070")
    target = dig(service_port, "targetPort")
    container_port = next(
        (
            p
            for p in items(container.get("ports"))
            if target is not None and (dig(p, "name") == target or _is(dig(p, "containerPort"), target))
        ),
        None,
    )
    if container_port is None or port is None or not _is(container_port.get("containerPort"), port):
        errors.append(f"{describe(service)}: targetPort does not reach --listen={listen}")
    if not _loopback(listen) and not _secured(container) and "--insecure-listen" not in items(container.get("args")):
        errors.append(
            f"{name}: --listen={listen} is reachable from other pods without TLS; give --tls-cert and "
            "--tls-key, or say --insecure-listen (the coordinator refuses to start otherwise)"
        )
    # Mutual TLS by default; the kubelet's probes (no client certificate) use the plaintext
    # health-only port.
    if "--insecure-listen" in items(container.get("args")):
        errors.append(f"{name}: --insecure-listen: the coordinator must serve mutual TLS")
    _check_tls_files(coordinator_job, container, name, errors)
    health = _port(flag_value(container, "health-listen"))
    if health is None:
        errors.append(f"{name}: needs --health-listen (plaintext grpc.health.v1 for the probes)")
    elif health == port:
        errors.append(f"{name}: --health-listen must be a port of its own, not --listen's")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if health is not None and not _is(dig(container, probe, "grpc", "port"), health):
            errors.append(f"{name}: {probe} must target --health-listen (port {health})")
    # Ready while training progresses (a stalled worker turns it NOT_SERVING); alive while the
    # process answers (a stall is no reason to restart the coordinator).
    if dig(container, "readinessProbe", "grpc", "service") != PROGRESS_SERVICE:
        errors.append(f"{name}: readinessProbe must ask for service {PROGRESS_SERVICE} (training progress)")
    if dig(container, "livenessProbe", "grpc", "service") not in (None, ""):
        errors.append(f"{name}: livenessProbe must ask for the overall status (no service)")
    state = _claim_holding(coordinator_job, flag_value(container, "state-dir") or "")
    if state is None or dig(state["volume"], "persistentVolumeClaim") is None or state["read_only"]:
        errors.append(f"{name}: --state-dir must be on a writable PersistentVolumeClaim")
    job_path = flag_value(container, "job") or ""
    job_mount = _claim_holding(coordinator_job, job_path)
    config_map = None
    if job_mount is not None and dig(job_mount["volume"], "configMap") is not None:
        config_map = _find(objects, "ConfigMap", dig(job_mount["volume"], "configMap", "name"))
    key = job_path[len(job_mount["dir"]) + 1 if job_mount else 1:]
    text = dig(config_map, "data", key)
    if text is None:
        errors.append(f"{name}: --job={job_path} is not a key of a mounted ConfigMap")
        return
    context["job_spec_text"] = str(text)
    try:
        context["job_spec"] = yaml12.load(str(text))
    except yaml12.yaml.YAMLError as error:
        errors.append(f"{describe(config_map)}: {key} is not valid YAML: {error}")
        return
    context["coordinator"] = {"job": coordinator_job, "container": container, "service": service}


def _check_workers(objects, errors, context):
    workers = _find(objects, "Job", WORKER)
    if workers is None:
        errors.append(f"Job/{WORKER} missing")
        return
    name = describe(workers)
    labels = dig(workers, "spec", "template", "metadata", "labels")
    pod = _mapping(dig(workers, "spec", "template", "spec"))
    headless = _find(objects, "Service", pod.get("subdomain"))
    if headless is not None and not _selects(dig(headless, "spec", "selector"), labels):
        errors.append(f"{describe(headless)}: selector does not select the workers")
    grace = _number(pod.get("terminationGracePeriodSeconds"))
    if not (grace is not None and grace >= 60):
        errors.append(f"{name}: terminationGracePeriodSeconds must be >= 60 (SIGTERM drains at a step boundary)")
    container = _first_container(workers)
    check_worker_job(objects, workers, container, headless, dig(context.get("job_spec"), "elastic"), errors)

    def field_of(flag):
        m = re.fullmatch(r"\$\((\w+)\)", flag_value(container, flag) or "", re.ASCII)
        return dig(_env(container, m.group(1)), "valueFrom", "fieldRef", "fieldPath") if m else None

    if field_of("node") != "spec.nodeName":
        errors.append(f"{name}: --node must come from spec.nodeName")
    if field_of("data-address") != "status.podIP":
        errors.append(f"{name}: --data-address must come from status.podIP")
    coordinator = context.get("coordinator")
    if coordinator is not None:
        address = flag_value(container, "coordinator") or ""
        host = address.rpartition(":")[0]
        service = coordinator["service"]
        dns = re.escape(str(dig(service, "metadata", "name"))) + r"(\.\$\(POD_NAMESPACE\)\.svc(\.cluster\.local)?)?"
        port = _port(address)
        if not re.fullmatch(dns, host) or port is None or not _is(dig(service, "spec", "ports", 0, "port"), port):
            errors.append(f"{name}: --coordinator={address} is not the coordinator Service's DNS name and port")
    health = _port(flag_value(container, "health-listen"))
    if health is None or not _is(dig(container, "readinessProbe", "grpc", "port"), health):
        errors.append(f"{name}: probes must target --health-listen")
    _check_tls_files(workers, container, name, errors)
    context["workers"] = workers


def _check_shared_storage(objects, errors, context):
    """Checkpoint and output directories: on one ReadWriteMany claim, writable by the
    coordinator and the workers."""
    job, coordinator, workers = context.get("job_spec"), context.get("coordinator"), context.get("workers")
    if not isinstance(job, dict) or coordinator is None or workers is None:
        return
    for what, path in (("checkpoint.dir", dig(job, "checkpoint", "dir")), ("output_dir", job.get("output_dir"))):
        if not path:
            continue
        claims = [_claim_holding(o, str(path)) for o in (coordinator["job"], workers)]
        names = [dig(c, "volume", "persistentVolumeClaim", "claimName") if c else None for c in claims]
        if None in names or names[0] != names[1] or any(c["read_only"] for c in claims):
            errors.append(f"job {what}={path}: must be on one writable PVC mounted by coordinator and workers")
            continue
        pvc = _find(objects, "PersistentVolumeClaim", names[0])
        if "ReadWriteMany" not in items(dig(pvc, "spec", "accessModes")):
            errors.append(f"PersistentVolumeClaim/{names[0]}: must be ReadWriteMany (holds {what})")
    flag = flag_value(coordinator["container"], "checkpoint-dir")
    if flag is not None and flag != dig(job, "checkpoint", "dir"):
        errors.append(f"coordinator --checkpoint-dir={flag} differs from the job's checkpoint.dir")


def _check_accelerator(objects, accelerator, errors, context):
    workers = context.get("workers")
    if workers is None:
        return
    name = describe(workers)
    pod = _mapping(dig(workers, "spec", "template", "spec"))
    container = _first_container(workers)
    devices = _VAR_RE.sub(lambda m: str(dig(_env(container, m.group(1)), "value", default=m.group(0))),
                          flag_value(container, "devices") or "")
    if accelerator in ("gpu", "rdma"):
        gpus = [_number(dig(container, "resources", k, "nvidia.com/gpu")) for k in ("requests", "limits")]
        if any(g is None or g < 1 for g in gpus):
            errors.append(f"{name}: must request and limit nvidia.com/gpu")
        if not dig(pod, "nodeSelector"):
            errors.append(f"{name}: needs a nodeSelector for GPU nodes")
        if not any(dig(t, "key") == "nvidia.com/gpu" for t in items(pod.get("tolerations"))):
            errors.append(f"{name}: needs a nvidia.com/gpu toleration")
        if not re.match(r"cuda:\d", str(devices or "")):
            errors.append(f"{name}: devices must be cuda:N, got {devices}")
    else:
        for obj in objects:
            for c in containers_of(obj):
                if "nvidia.com/gpu" in json.dumps(c.get("resources") or {}):
                    errors.append(f"{describe(obj)}: requests a GPU in the cpu overlay")
        if devices != "cpu":
            errors.append(f"{name}: devices must be cpu, got {devices}")


# Kinds that live outside any namespace.
_CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume",
                   "StorageClass", "PriorityClass", "CustomResourceDefinition"}


def _check_one_namespace(objects, errors):
    """Every namespaced object names the job's Namespace: one without a namespace would be
    created wherever kubectl points, where the job's pods cannot use it."""
    namespaces = [o.get("metadata", {}).get("name") for o in objects if o.get("kind") == "Namespace"]
    if len(namespaces) != 1:
        errors.append(f"the overlay must create exactly one Namespace (found {len(namespaces)})")
        return
    for o in objects:
        if o.get("kind") in _CLUSTER_SCOPED:
            continue
        ns = _mapping(o.get("metadata")).get("namespace")
        if ns != namespaces[0]:
            errors.append(f"{describe(o)}: namespace must be {namespaces[0]} (is {ns or 'unset'})")


def check_policy(objects, accelerator, job_checker):
    """Every rule on the objects of one rendered overlay; `accelerator` is 'cpu', 'gpu' or
    'rdma' (gpu plus the host's RDMA devices).
    `job_checker` is a job_spec.JobSpecChecker (the coordinator's own rules), or None to leave
    the job spec unchecked."""
    objects = [o for o in objects if isinstance(o, dict)]
    errors = []
    context = {}
    _check_one_namespace(objects, errors)
    _check_container_security(objects, accelerator, errors)
    check_pod_security_level(objects, accelerator, errors)
    _check_volume_references(objects, errors)
    _check_coordinator(objects, errors, context)
    if "job_spec" in context and job_checker is not None:
        errors.extend(f"job spec: {m}" for m in job_checker.check(context["job_spec_text"], context["job_spec"]))
    _check_workers(objects, errors, context)
    _check_shared_storage(objects, errors, context)
    _check_accelerator(objects, accelerator, errors, context)
    check_rdma(objects, accelerator, context.get("workers"), errors)
    return errors
