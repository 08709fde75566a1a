"""A pod's container run as a process in the pod's network namespace, with the container's
grpc probes tried against it while it runs.

RunningPod.start() starts the process in a session of its own (so kill() reaches everything it
started) with exactly the environment given (the container's, plus PATH), its output to a log
file. probe() runs each of the container's startup, readiness and liveness probes that has not
yet answered SERVING once (retort_deploy.grpc_probe, the pod's IP and the probe's port and
service) and keeps the last answer; probes_never_serving() lists the ones that never did. One
thread drives a RunningPod.
"""
import os
import signal
import subprocess

from . import grpc_probe
from .manifests import dig

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


class RunningPod:
    def __init__(self, pod, container, argv, env, log_path):
        self.pod = pod
        self.container = container
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.process = None
        self.exit_code = None
        self.probes = {}  # probe -> last answer
        for probe in PROBES:
            port = dig(container, probe, "grpc", "port")
            if port is not None:
                self.probes[probe] = None

    def start(self, network, namespace, cwd):
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                network.command(namespace, self.argv), env=self.env, cwd=cwd, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def poll(self):
        """The exit code once the process ended, else None."""
        if self.process is not None and self.exit_code is None:
            self.exit_code = self.process.poll()
        return self.exit_code

    def probe(self):
        for probe, answer in self.probes.items():
            if answer == "SERVING":
                continue
            port = dig(self.container, probe, "grpc", "port")
            service = dig(self.container, probe, "grpc", "service", default="")
            self.probes[probe] = grpc_probe.check(self.pod.ip, port, service, timeout_s=0.5)

    def probes_never_serving(self):
        """(probe, port, service, last answer) for each probe that never answered SERVING."""
        return [(p, dig(self.container, p, "grpc", "port"), dig(self.container, p, "grpc", "service", default=""), a)
                for p, a in self.probes.items() if a != "SERVING"]

    def _signal(self, signo):
        """`signo` to everything the pod started; whether it was still running."""
        if self.process is None or self.process.poll() is not None:
            return False
        try:
            os.killpg(self.process.pid, signo)
        except ProcessLookupError:
            pass
        return True

    def terminate(self):
        """SIGTERM to everything the pod started (what the kubelet sends first)."""
        self._signal(signal.SIGTERM)

    def kill(self):
        if self._signal(signal.SIGKILL):
            self.process.wait(timeout=10)

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as error:
            return f"(no log: {error})"
