"""The device every worker pod of a rendered manifest would train on, asked of the built
retort-worker (`--print-device-table --json`), so the rule (worker/worker_device.h) is not
copied here.

For each container that runs retort-worker: its --device (default auto) and --devices (default:
the resolved device), with $(VAR) taken from the container's literal env values; the local rank
of pod i (--local-rank=$(VAR) with VAR the Job's completion index, from the
batch.kubernetes.io/job-completion-index annotation or label, or JOB_COMPLETION_INDEX, which the
Job controller sets: i; a literal number: that number); the CUDA devices the pod sees (its
nvidia.com/gpu limit, 0 without one). Pods 0 .. N-1 are checked, N the larger of the worker
Job's parallelism and the job spec's elastic.max_workers (what scaling up to the job's bound
creates). A pod whose device does not resolve, or whose --devices names another
device than the one it trains on, is an error naming the pod and the worker's message.
"""
import json
import posixpath
import re
import subprocess

from . import yaml12
from .job_rules import COMPLETION_INDEX_ENV, COMPLETION_INDEX_FIELDS
from .manifests import containers_of, describe, dig, items

WORKER_BINARY = "retort-worker"
_VAR_RE = re.compile(r"\$\((\w+)\)", re.ASCII)


def _flag(args, name):
    prefix = f"--{name}="
    return next((a[len(prefix):] for a in args if isinstance(a, str) and a.startswith(prefix)), None)


def _expand(value, container):
    """value with each $(VAR) replaced by the container's literal env value; (text, None) or
    (None, why) when a variable has no literal value."""
    env = {dig(e, "name"): e for e in items(container.get("env")) if isinstance(e, dict)}
    missing = []

    def substitute(match):
        entry = env.get(match.group(1))
        if entry is None or "value" not in entry:
            missing.append(match.group(1))
            return match.group(0)
        return str(entry["value"])

    text = _VAR_RE.sub(substitute, value)
    if missing:
        return None, f"$({missing[0]}) has no literal env value"
    return text, None


def _max_workers(objects):
    """The largest elastic.max_workers of the job specs in the manifests' ConfigMaps, or 0."""
    best = 0
    for obj in objects:
        if obj.get("kind") != "ConfigMap":
            continue
        for text in (dig(obj, "data") or {}).values():
            try:
                spec = yaml12.load(str(text))
            except (ValueError, yaml12.yaml.YAMLError):
                continue
            value = dig(spec, "elastic", "max_workers")
            if isinstance(value, int) and not isinstance(value, bool):
                best = max(best, value)
    return best


def _gpu_limit(container):
    value = dig(container, "resources", "limits", "nvidia.com/gpu", default=0)
    try:
        return int(str(value))
    except ValueError:
        return None


def _ask_worker(worker, args):
    """The JSON retort-worker prints for `args`, or raises RuntimeError saying why not."""
    command = [str(worker), *args, "--json"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise RuntimeError(f"{' '.join(command)}: {error}") from error
    try:
        return json.loads(result.stdout)
    except ValueError as error:
        raise RuntimeError(
            f"{' '.join(command)} exited {result.returncode} without JSON: {result.stderr.strip()}"
        ) from error


def _is_completion_index(name, env):
    """Whether env variable `name` holds the pod's completion index in an Indexed Job."""
    if name not in env:
        return name == COMPLETION_INDEX_ENV  # set by the Job controller itself
    return dig(env[name], "valueFrom", "fieldRef", "fieldPath") in COMPLETION_INDEX_FIELDS


def _query(obj, container, pods_wanted):
    """(retort-worker arguments, whether they ask for a per-pod table, pods they stand for), or
    raises ValueError saying why the container's device cannot be checked."""
    args = [str(a) for a in items(container.get("args"))]
    query = []
    for name in ("device", "devices"):
        raw = _flag(args, name)
        if raw is not None:
            value, why = _expand(raw, container)
            if why:
                raise ValueError(f"--{name}={raw}: {why}, so the device cannot be checked")
            query.append(f"--{name}={value}")
    visible = _gpu_limit(container)
    if visible is None:
        raise ValueError("nvidia.com/gpu limit is not a whole number")
    query.append(f"--visible-devices={visible}")
    parallelism = dig(obj, "spec", "parallelism", default=1)
    pods = max(parallelism if isinstance(parallelism, int) else 1, pods_wanted, 1)
    rank = _flag(args, "local-rank") or "0"
    variable = _VAR_RE.fullmatch(rank)
    env = {dig(e, "name"): e for e in items(container.get("env")) if isinstance(e, dict)}
    if variable and _is_completion_index(variable.group(1), env):
        return query + [f"--print-device-table={pods}"], True, pods
    value, why = _expand(rank, container)
    if why or not (value or "").isdigit():
        raise ValueError(f"--local-rank={rank} is neither the pod index nor a number")
    return query + ["--print-device", f"--local-rank={value}"], False, pods


def check_devices(objects, worker):
    """(error messages, pods checked) for the workers in one rendered file's objects, resolved
    by the retort-worker binary at `worker`."""
    errors = []
    checked = 0
    pods_wanted = _max_workers(objects)
    for obj in objects:
        for container in containers_of(obj):
            if posixpath.basename(str((items(container.get("command")) or [""])[0])) != WORKER_BINARY:
                continue
            where = f"{describe(obj)} container {container.get('name')}"
            try:
                query, per_pod, pods = _query(obj, container, pods_wanted)
                answer = _ask_worker(worker, query)
            except (ValueError, RuntimeError) as error:
                errors.append(f"{where}: {error}")
                continue
            ranks = answer.get("ranks", [])
            checked += len(ranks) if per_pod else pods
            for entry in ranks:
                if "error" not in entry:
                    continue
                pod = f"pod {entry['local_rank']}" if per_pod else f"every pod (local rank {entry['local_rank']})"
                errors.append(
                    f"{where}: {pod}, seeing {answer.get('visible_cuda_devices')} GPU(s) by its "
                    f"nvidia.com/gpu limit ({' '.join(query)}): {entry['error']}"
                )
    return errors, checked
