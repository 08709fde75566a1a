"""The Kubernetes Job rules of retort's manifests: the coordinator and the workers are batch/v1
Jobs that complete once (deploy/README.md, "What runs where" and "Exit codes").

Both Jobs: pods are replaced, never restarted in place (restartPolicy Never); a pod failure
policy fails the Job at once on the exit codes a retry cannot fix and ignores pods that
Kubernetes disrupted (the DisruptionTarget condition: drains, preemption); a SIGTERM before
the job ended exits 143 (--signal-exit-code), so an evicted pod is a failed pod the Job
replaces, not a completed one. The coordinator: one pod (completions = parallelism = 1), exit
codes 2 (usage, a changed spec) and 3 (job failed) fail the Job, and it answers for a while
after the job ended (--linger-after-end-ms), so late worker pods learn the end and exit 0. The workers: an Indexed Job
(completions = parallelism, the scaling knob), the completion index as local rank, pods
addressable under the headless Service (subdomain), exit 2 fails the Job. Disruption budgets
with an integer minAvailable (the only form Kubernetes honours for a Job's pods): 1 for the
coordinator, elastic.min_workers for the workers.

Each check appends messages naming the object to `errors`; nothing else is changed.
"""
import re

from .manifests import describe, dig, items

COORDINATOR_FAIL_JOB_CODES = frozenset({2, 3})
WORKER_FAIL_JOB_CODES = frozenset({2})
SIGNAL_EXIT_CODE = "143"
# Where the Job controller puts a pod's completion index (annotation; label from 1.28).
COMPLETION_INDEX_FIELDS = frozenset({
    "metadata.annotations['batch.kubernetes.io/job-completion-index']",
    "metadata.labels['batch.kubernetes.io/job-completion-index']",
})
# The variable the Job controller itself adds to every container of an Indexed Job's pods.
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
_VAR_RE = re.compile(r"\$\((\w+)\)", re.ASCII)


def _is(value, expected):
    return not isinstance(value, bool) and value == expected


def _flag(container, name):
    prefix = f"--{name}="
    return next((a[len(prefix):] for a in items(container.get("args"))
                 if isinstance(a, str) and a.startswith(prefix)), None)


def _fail_job_codes(job, container_name):
    """Exit codes for which the pod failure policy fails the Job, for `container_name`."""
    codes = set()
    for rule in items(dig(job, "spec", "podFailurePolicy", "rules")):
        on_codes = dig(rule, "onExitCodes")
        if dig(rule, "action") != "FailJob" or not isinstance(on_codes, dict):
            continue
        if on_codes.get("containerName") not in (None, container_name) or on_codes.get("operator") != "In":
            continue
        codes.update(v for v in items(on_codes.get("values")) if isinstance(v, int))
    return codes


def _ignores_disruptions(job):
    """Whether a rule ignores pods with the DisruptionTarget condition (status True)."""
    return any(
        dig(rule, "action") == "Ignore"
        and any(dig(c, "type") == "DisruptionTarget" and dig(c, "status", default="True") == "True"
                for c in items(dig(rule, "onPodConditions")))
        for rule in items(dig(job, "spec", "podFailurePolicy", "rules"))
    )


def budget_selecting(objects, labels):
    """The PodDisruptionBudget whose matchLabels select pods with `labels`, or None."""
    labels = labels if isinstance(labels, dict) else {}
    for obj in objects:
        selector = dig(obj, "spec", "selector", "matchLabels")
        if obj.get("kind") == "PodDisruptionBudget" and isinstance(selector, dict) and selector and all(
                labels.get(k) == v for k, v in selector.items()):
            return obj
    return None


def _check_common(objects, job, container, fail_codes, errors):
    name = describe(job)
    if dig(job, "spec", "template", "spec", "restartPolicy") != "Never":
        errors.append(f"{name}: restartPolicy must be Never (the pod failure policy needs it; "
                      "a failed pod is replaced, never restarted in place)")
    backoff = dig(job, "spec", "backoffLimit")
    if not (isinstance(backoff, int) and not isinstance(backoff, bool) and backoff >= 1):
        errors.append(f"{name}: backoffLimit must be set and >= 1 (failed pods are replaced)")
    codes = _fail_job_codes(job, container.get("name"))
    if codes != set(fail_codes):
        errors.append(f"{name}: podFailurePolicy must fail the Job on exit codes "
                      f"{sorted(fail_codes)} of container {container.get('name')} exactly "
                      f"(has {sorted(codes)})")
    if not _ignores_disruptions(job):
        errors.append(f"{name}: podFailurePolicy must Ignore pods with the DisruptionTarget "
                      "condition (an evicted pod is replaced without counting as a failure)")
    if _flag(container, "signal-exit-code") != SIGNAL_EXIT_CODE:
        errors.append(f"{name}: needs --signal-exit-code={SIGNAL_EXIT_CODE} (a SIGTERM before "
                      "the job ended must not complete the pod)")


def check_coordinator_job(objects, job, container, errors):
    """One coordinator pod at a time, retried on errors, failed on 2 and 3; its budget."""
    name = describe(job)
    for field in ("completions", "parallelism"):
        if not _is(dig(job, "spec", field), 1):
            errors.append(f"{name}: {field} must be 1 (one coordinator on a ReadWriteOnce state volume)")
    _check_common(objects, job, container, COORDINATOR_FAIL_JOB_CODES, errors)
    linger = _flag(container, "linger-after-end-ms")
    if linger is None or not linger.isdigit() or int(linger) <= 0:
        errors.append(f"{name}: needs --linger-after-end-ms > 0 (a worker pod replaced as the job "
                      "ends must find a coordinator that tells it so, or it waits for ever)")
    budget = budget_selecting(objects, dig(job, "spec", "template", "metadata", "labels"))
    if budget is None or not _is(dig(budget, "spec", "minAvailable"), 1) or \
            dig(budget, "spec", "maxUnavailable") is not None:
        errors.append(f"{name}: needs a PodDisruptionBudget with minAvailable 1 (a drain must "
                      "not evict it; a Job's pods allow no maxUnavailable)")


def _index_source(container):
    """Whether --local-rank is the pod's completion index (an env var from its annotation or
    label, or JOB_COMPLETION_INDEX, which the Job controller sets)."""
    match = _VAR_RE.fullmatch(_flag(container, "local-rank") or "")
    if match is None:
        return False
    env = next((e for e in items(container.get("env")) if dig(e, "name") == match.group(1)), None)
    if env is None:
        return match.group(1) == COMPLETION_INDEX_ENV
    return dig(env, "valueFrom", "fieldRef", "fieldPath") in COMPLETION_INDEX_FIELDS


def check_worker_job(objects, job, container, headless, elastic, errors):
    """The Indexed worker Job: size, identity, addressing, failure policy, budget and bounds.
    `headless` is the Service the pods' subdomain names (or None); `elastic` the job spec's
    elastic mapping (or None)."""
    name = describe(job)
    spec = job.get("spec") if isinstance(job.get("spec"), dict) else {}
    if spec.get("completionMode") != "Indexed":
        errors.append(f"{name}: completionMode must be Indexed (the completion index is the worker's identity)")
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    if not (isinstance(parallelism, int) and not isinstance(parallelism, bool) and parallelism >= 1) \
            or completions != parallelism:
        errors.append(f"{name}: completions ({completions}) must equal parallelism ({parallelism}) "
                      "(an Indexed Job scales by changing both)")
    _check_common(objects, job, container, WORKER_FAIL_JOB_CODES, errors)
    if not _index_source(container):
        errors.append(f"{name}: --local-rank must be the completion index "
                      "(batch.kubernetes.io/job-completion-index)")
    if headless is None or dig(headless, "spec", "clusterIP") != "None":
        errors.append(f"{name}: subdomain must name a headless Service (pods addressable by hostname)")
    labels = dig(job, "spec", "template", "metadata", "labels")
    low = dig(elastic, "min_workers") if isinstance(elastic, dict) else None
    high = dig(elastic, "max_workers") if isinstance(elastic, dict) else None
    budget = budget_selecting(objects, labels)
    wanted = low if isinstance(low, int) else 1
    if budget is None or not _is(dig(budget, "spec", "minAvailable"), wanted) or \
            dig(budget, "spec", "maxUnavailable") is not None:
        errors.append(f"{name}: needs a PodDisruptionBudget with minAvailable {wanted} (the job's "
                      "elastic.min_workers; a Job's pods allow no maxUnavailable)")
    if isinstance(parallelism, int) and ((isinstance(low, int) and parallelism < low) or
                                         (isinstance(high, int) and parallelism > high)):
        errors.append(f"{name}: parallelism {parallelism} outside the job's elastic bounds {low}..{high}")
