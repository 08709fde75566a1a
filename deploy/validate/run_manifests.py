#!/usr/bin/env python3
"""Usage: run_manifests.py --bin-dir=BUILD/tools [--steps=N] [--timeout-s=S] RENDERED.yaml

Runs what a rendered overlay says (ctest deploy.run.cpu): every pod the overlay's Jobs start is
run for real, as a process, from its container's `command` and `args`, until the job ends; then
the Jobs must be complete (every pod exited 0), every grpc probe must have answered SERVING,
and the job's result must be there. A flag that does not exist fails (the binary refuses it);
one that means something else fails the probes or the result checks (the members' nodes and
local ranks, the state, the checkpoint, result.json).

What Kubernetes would do is substituted, and nothing else:
- Jobs: `parallelism` pods each; an Indexed Job's pod i gets completion index i (annotation,
  label, JOB_COMPLETION_INDEX) and hostname <job>-<i> (retort_deploy/pod_templates.py). A failed
  pod is not replaced: in this short healthy run any failure is a test failure.
- Pods: each in a network namespace of its own with its own IP over a veth and a bridge
  (retort_deploy/netns.py), on a node of its own (spec.nodeName node-<k>); env from the
  downward API (namespace, pod name, node name, pod IP, annotations, labels) and literal values.
- DNS: each namespace's /etc/hosts maps the names cluster DNS would serve: a ClusterIP
  Service's <svc>, <svc>.<ns>, <svc>.<ns>.svc[.cluster.local] to the IP of the one pod it
  selects (kube-proxy's job; so a Service's port must equal its target container port here), a
  pod with a subdomain's <hostname>.<subdomain>.<ns>.svc[.cluster.local] to its IP. The binaries
  resolve the Service name as written in the manifests; nothing in their arguments is replaced.
- Volumes: PVCs are folders shared by every pod that mounts the claim, emptyDirs folders per
  pod, ConfigMaps their keys as files, Secrets the certificates `retortctl certs` makes (as
  deploy/README.md step 3 says, for the coordinator Service's DNS names); every path under a
  mount, in arguments, env values and ConfigMap files, is rewritten to its folder
  (retort_deploy/pod_volumes.py). /opt/retort/bin/NAME is BUILD/tools/NAME; other paths (the
  image's Fashion-MNIST at /usr/share/datasets) are this machine's.
- The job spec (the coordinator's --job ConfigMap) is made short: `steps: N` instead of its
  length, optimizer.warmup_steps at most N, a checkpoint every N/2 steps, no evaluation. The rest
  of the spec is the overlay's.
- After the job: once every worker pod exited 0, the coordinator must still be answering
  (--linger-after-end-ms); a late copy of worker pod 0 (what a replaced pod is) is started and
  must exit 0 saying the job ended; then the coordinator gets SIGTERM, as the kubelet would send
  it, and must exit 0 (the job had ended, so --signal-exit-code does not apply).
Not emulated: the pod security context (processes run as root, root filesystem writable),
resource limits, image contents, the scheduler, restarts.

Bounded: every wait has a deadline (--timeout-s for the whole job); on any failure every process
is killed, and the namespaces are removed in every case. Exit status: 0 passed, 1 failed (each
problem printed, with the failing pods' log tails), 77 skipped (not root, or no `ip netns`).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from retort_deploy import yaml12
from retort_deploy.manifests import ManifestError, containers_of, dig, items, load_manifests
from retort_deploy.netns import NetworkError, PodNetwork, unavailable_reason
from retort_deploy.pod_processes import RunningPod
from retort_deploy.pod_templates import PodTemplateError, command_line, container_env, pods_of_job
from retort_deploy.pod_volumes import PodVolumes

SKIPPED = 77
IMAGE_BIN = "/opt/retort/bin/"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The Secrets of deploy/README.md step 3: name -> files of `retortctl certs --out`.
SECRETS = {
    "retort-coordinator-tls": ("ca.crt", "coordinator.crt", "coordinator.key"),
    "retort-worker-tls": ("ca.crt", "worker.crt", "worker.key"),
    "retort-operator-tls": ("ca.crt", "operator.crt", "operator.key"),
}


class RunError(Exception):
    """The manifests cannot be run as written; the message says why."""


def flag(container, name):
    prefix = f"--{name}="
    return next((str(a)[len(prefix):] for a in items(container.get("args")) if str(a).startswith(prefix)), None)


def binary_of(container):
    command = items(container.get("command"))
    return os.path.basename(str(command[0])) if command else ""


def short_spec(text, steps):
    """The job spec text made short (see the module doc), and what was changed."""
    spec = yaml12.load(text)
    spec.pop("epochs", None)
    spec["steps"] = steps
    optimizer = spec.setdefault("optimizer", {})
    optimizer["warmup_steps"] = min(int(optimizer.get("warmup_steps", 0)), steps)
    spec.setdefault("checkpoint", {})["every_steps"] = max(1, steps // 2)
    spec["evaluate"] = False
    changes = (f"steps: {steps}, optimizer.warmup_steps: {optimizer['warmup_steps']}, "
               f"checkpoint.every_steps: {spec['checkpoint']['every_steps']}, evaluate: false")
    return json.dumps(spec), spec, changes


def job_spec_source(coordinator_job, container):
    """(ConfigMap name, key) that the coordinator's --job file comes from."""
    path = flag(container, "job") or ""
    volumes = {v.get("name"): v for v in items(dig(coordinator_job, "spec", "template", "spec", "volumes"))}
    for mount in items(container.get("volumeMounts")):
        folder = str(mount.get("mountPath")).rstrip("/")
        volume = volumes.get(mount.get("name"), {})
        if path.startswith(folder + "/") and "configMap" in volume:
            return dig(volume, "configMap", "name"), path[len(folder) + 1:]
    raise RunError(f"--job={path} is not a file of a mounted ConfigMap")


def make_certs(retortctl, folder, namespace, service):
    hosts = f"{service}.{namespace}.svc,{service}.{namespace}.svc.cluster.local"
    result = subprocess.run([retortctl, "certs", f"--out={folder}", f"--hosts={hosts}"],
                            capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise RunError(f"retortctl certs failed: {result.stderr.strip()}")
    return {name: {f: os.path.join(folder, f) for f in files} for name, files in SECRETS.items()}


def selected(service, pods):
    selector = dig(service, "spec", "selector", default={})
    return [p for p in pods if selector and all(p.labels.get(k) == v for k, v in selector.items())]


def dns_entries(objects, pods, namespace):
    """(address, names) for the hosts files; raises RunError for what cannot be emulated."""
    entries = []
    for service in (o for o in objects if o.get("kind") == "Service"):
        name = dig(service, "metadata", "name")
        targets = selected(service, pods)
        if dig(service, "spec", "clusterIP") == "None" or not targets:
            continue
        if len(targets) != 1:
            raise RunError(f"Service/{name} selects {len(targets)} pods; this emulation maps its name to one")
        ports = {p.get("name"): p.get("containerPort") for c in containers_of({"kind": "Pod", "spec": targets[0].spec})
                 for p in items(c.get("ports"))}
        for port in items(dig(service, "spec", "ports")):
            target = port.get("targetPort", port.get("port"))
            if ports.get(target, target) != port.get("port"):
                raise RunError(f"Service/{name} port {port.get('port')} -> {target}: this emulation needs them equal")
        entries.append((targets[0].ip, [name, f"{name}.{namespace}", f"{name}.{namespace}.svc",
                                        f"{name}.{namespace}.svc.cluster.local"]))
    for pod in pods:
        names = [pod.hostname]
        if pod.spec.get("subdomain"):
            base = f"{pod.hostname}.{pod.spec['subdomain']}.{namespace}.svc"
            names += [base, f"{base}.cluster.local"]
        entries.append((pod.ip, names))
    return entries


def check_outcome(coordinator, workers, spec, steps):
    """Problems with how the job ended, from the coordinator's state directory and the job's
    output (paths as the coordinator pod sees them, through its volumes)."""
    volumes, container = coordinator.volumes, coordinator.container
    problems = []
    state_path = os.path.join(volumes.host_path(flag(container, "state-dir") or ""), "state.json")
    try:
        with open(state_path, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError) as error:
        return [f"coordinator state {state_path}: {error}"]
    if state.get("state") != "JOB_STATE_COMPLETED":
        problems.append(f"job state {state.get('state')}, not JOB_STATE_COMPLETED")
    members = {(m.get("node", ""), int(m.get("local_rank", 0))) for m in state.get("last_generation_members", [])}
    expected = {(w.pod.node, w.pod.index) for w in workers}
    if members != expected:
        problems.append(f"the last generation's members (node, local rank) are {sorted(members)}, "
                        f"not the worker pods' (node, completion index) {sorted(expected)}")
    checkpoint_dir = volumes.host_path(flag(container, "checkpoint-dir") or spec["checkpoint"]["dir"])
    manifest = os.path.join(checkpoint_dir, f"ckpt-{int(state.get('last_checkpoint_id', 0)):08d}", "MANIFEST.json")
    if not os.path.isfile(manifest):
        problems.append(f"no committed checkpoint: {manifest} missing")
    result_path = os.path.join(volumes.host_path(spec["output_dir"]), "result.json")
    try:
        with open(result_path, encoding="utf-8") as f:
            result = json.load(f)
        if result.get("job") != spec["name"] or result.get("steps") != steps:
            problems.append(f"{result_path}: job {result.get('job')} steps {result.get('steps')}, "
                            f"expected {spec['name']} steps {steps}")
        # Written by a worker, whose --job paths were already rewritten: a path on this machine.
        if not os.path.isfile(str(result.get("student_weights"))):
            problems.append(f"{result_path}: student_weights {result.get('student_weights')} missing")
    except (OSError, ValueError) as error:
        problems.append(f"job result: {error}")
    return problems


def prepare(objects, bin_dir, steps, root, network):
    """Every pod of every Job, ready to start: (running pods, the coordinator, spec, changes)."""
    namespace = next((dig(o, "metadata", "name") for o in objects if o.get("kind") == "Namespace"), "default")
    config_maps = {dig(o, "metadata", "name"): dict(dig(o, "data", default={}))
                   for o in objects if o.get("kind") == "ConfigMap"}
    jobs = [o for o in objects if o.get("kind") == "Job"]
    other = sorted({o.get("kind") for o in objects if o.get("kind") in ("Deployment", "StatefulSet", "Pod", "DaemonSet")})
    if other:
        raise RunError(f"workloads of kinds {other}: only Jobs are run")
    coordinator_job = next((j for j in jobs if any(binary_of(c) == "retort-coordinator" for c in containers_of(j))), None)
    if coordinator_job is None:
        raise RunError("no Job runs retort-coordinator")
    coordinator_container = containers_of(coordinator_job)[0]
    name, key = job_spec_source(coordinator_job, coordinator_container)
    text, spec, changes = short_spec(config_maps[name][key], steps)
    config_maps[name] = {**config_maps[name], key: text}
    service = next((dig(s, "metadata", "name") for s in objects if s.get("kind") == "Service"
                    and dig(s, "spec", "clusterIP") != "None"), "retort-coordinator")
    secrets = make_certs(os.path.join(bin_dir, "retortctl"), os.path.join(root, "certs"), namespace, service)
    pods = [pod for job in jobs for pod in pods_of_job(job, namespace)]
    for number, pod in enumerate(pods):
        pod.namespace_name, pod.ip = network.add()
        pod.node = f"node-{number}"
    network.set_hosts(dns_entries(objects, pods, namespace))
    running, coordinator = [], None
    for pod in pods:
        containers = items(pod.spec.get("containers"))
        if len(containers) != 1 or pod.spec.get("initContainers"):
            raise RunError(f"pod {pod.name}: one container and no init containers are emulated")
        container = containers[0]
        command = items(container.get("command"))
        if len(command) != 1 or not str(command[0]).startswith(IMAGE_BIN):
            raise RunError(f"pod {pod.name}: command {command} is not one binary of {IMAGE_BIN}")
        binary = os.path.join(bin_dir, binary_of(container))
        if not os.access(binary, os.X_OK):
            raise RunError(f"{binary} missing (build it)")
        volumes = PodVolumes(pod, container, root, config_maps, secrets)
        env = {k: volumes.rewrite(v) for k, v in container_env(pod, container, config_maps).items()}
        argv = [binary] + [volumes.rewrite(a) for a in command_line(container, env)[1:]]
        runner = RunningPod(pod, container, argv, {**env, "PATH": PATH}, os.path.join(root, f"{pod.name}.log"))
        runner.volumes = volumes
        running.append(runner)
        if pod.job == dig(coordinator_job, "metadata", "name"):
            coordinator = runner
    return running, coordinator, spec, changes


class LateWorker:
    """After the job: the coordinator must linger (--linger-after-end-ms), a worker pod started
    then (a replaced pod, or one that waited for a place) must learn the job ended and exit 0,
    and SIGTERM to the lingering coordinator (the kubelet ending it) must exit 0: the job ended,
    so the signal interrupted nothing. Driven by run()'s loop, one step per round."""

    def __init__(self, coordinator, workers, root):
        self.coordinator = coordinator
        self.workers = workers
        self.root = root
        self.pod = None
        self.gone_with_the_job = False
        self.terminated = False

    def pods(self):
        return [self.pod] if self.pod is not None else []

    def step(self, network):
        if self.pod is None:
            if not self.workers or any(w.poll() != 0 for w in self.workers):
                return
            if self.coordinator.poll() is not None:
                self.gone_with_the_job = True
                return
            first = self.workers[0]
            self.pod = RunningPod(first.pod, first.container, first.argv, first.env,
                                  os.path.join(self.root, f"{first.pod.name}-late.log"))
            self.pod.start(network, first.pod.namespace_name, os.path.join(self.root, "pods"))
            print(f"run-manifests: every worker exited 0; started a late copy of {first.pod.name}")
        elif self.pod.poll() is not None and not self.terminated:
            self.coordinator.terminate()
            self.terminated = True

    def problems(self):
        if self.gone_with_the_job:
            return ["the coordinator exited with the job: a worker pod replaced after that would "
                    "wait for it for ever (--linger-after-end-ms)"]
        if self.pod is None:
            return []  # the job did not get that far: the other checks say why
        if self.pod.poll() is None:
            return ["the late worker pod was still waiting when the run ended"]
        if self.pod.exit_code != 0 or "nothing to do" not in self.pod.log_tail(50):
            return [f"the late worker pod exited {self.pod.exit_code} without learning that the "
                    f"job ended:\n{self.pod.log_tail()}"]
        return []


def run(rendered, bin_dir, steps, timeout_s):
    objects = [o for o in load_manifests(rendered) if isinstance(o, dict)]
    root = tempfile.mkdtemp(prefix="retort-run-manifests-")
    running = []
    try:
        with PodNetwork() as network:
            running, coordinator, spec, changes = prepare(objects, bin_dir, steps, root, network)
            print(f"run-manifests: {len(running)} pods; job spec made short ({changes})")
            for pod in running:
                os.makedirs(os.path.join(root, "pods"), exist_ok=True)
                pod.start(network, pod.pod.namespace_name, os.path.join(root, "pods"))
                print(f"run-manifests: started {pod.pod.name} at {pod.pod.ip}: {' '.join(pod.argv)}")
            deadline = time.monotonic() + timeout_s
            late = LateWorker(coordinator, [p for p in running if p is not coordinator], root)
            # Until every pod ended, the deadline passed, or a pod failed (which this run does
            # not retry: the others are then stopped).
            while any(p.poll() is None for p in running + late.pods()) and \
                    time.monotonic() < deadline and \
                    not any(p.poll() not in (None, 0) for p in running + late.pods()):
                for pod in running:
                    if pod.poll() is None:
                        pod.probe()
                late.step(network)
                time.sleep(0.2)
            problems = late.problems()
            for pod in running:
                if pod.poll() is None:
                    if time.monotonic() >= deadline:
                        problems.append(f"pod {pod.pod.name} still running after {timeout_s} s")
                    continue
                elif pod.exit_code != 0:
                    problems.append(f"pod {pod.pod.name} exited {pod.exit_code}: its Job would not complete")
                for probe, port, service, answer in pod.probes_never_serving():
                    problems.append(f"pod {pod.pod.name}: {probe} (port {port}, service '{service}') "
                                    f"never answered SERVING (last: {answer})")
            for pod in running + late.pods():
                pod.kill()
            if not problems:
                workers = [p for p in running if p is not coordinator]
                problems = check_outcome(coordinator, workers, spec, steps)
            for pod in running:
                if problems:
                    print(f"--- {pod.pod.name} (exit {pod.exit_code}), last lines of its log:\n{pod.log_tail()}")
            return problems
    finally:
        for pod in running:
            pod.kill()
        shutil.rmtree(root, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--timeout-s", type=float, default=60)
    parser.add_argument("rendered")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"run-manifests: SKIPPED: {reason}")
        return SKIPPED
    started = time.monotonic()
    try:
        problems = run(args.rendered, os.path.abspath(args.bin_dir), args.steps, args.timeout_s)
    except (ManifestError, RunError, PodTemplateError, NetworkError, OSError) as error:
        problems = [str(error)]
    for problem in problems:
        print(f"run-manifests: {problem}", file=sys.stderr)
    verdict = "FAILED" if problems else "passed"
    print(f"run-manifests: {args.rendered}: {verdict} in {time.monotonic() - started:.1f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
