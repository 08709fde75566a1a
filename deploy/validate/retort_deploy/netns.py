"""Pods' networks on one machine: each pod a network namespace with its own IPv4 address on a
private /24, joined by veth pairs to a bridge in the caller's namespace (which holds the .254
address, so the caller reaches every pod), and a per-namespace hosts file (ip netns exec
mounts /etc/netns/NAME/hosts over /etc/hosts) that stands in for cluster DNS.

A minimal Python counterpart of tests/testing/test_hosts.cc (network only: no PID, mount or
UTS namespaces). One PodNetwork at a time per machine: the constructor takes an exclusive
flock (waiting up to LOCK_TIMEOUT_S) and removes what a crashed earlier run left under the same
names; close() (also on exceptions, as a context manager) kills every process still in the
namespaces and removes the namespaces, veths, bridge and hosts files. Needs root and iproute2.
Not thread-safe.
"""
import fcntl
import os
import shutil
import signal
import subprocess
import time

PREFIX = "rtkd"  # retort deploy; names stay under the 15 characters of an interface name
BRIDGE = f"{PREFIX}br"
SUBNET = "10.214.77."
LOCK_PATH = "/run/retort-deploy-run.lock"
LOCK_TIMEOUT_S = 30
COMMAND_TIMEOUT_S = 20
MAX_PODS = 200


class NetworkError(Exception):
    """Setting up or using the namespaces failed; the message holds the command and output."""


def unavailable_reason():
    """None when pod networks can be made here, else why not (for a skip)."""
    if os.geteuid() != 0:
        return f"network namespaces need root (running as uid {os.geteuid()})"
    ip = shutil.which("ip")
    if ip is None:
        return "'ip' (iproute2) not found"
    try:
        result = subprocess.run([ip, "netns", "list"], capture_output=True, text=True,
                                timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"ip netns list: {error}"
    if result.returncode != 0:
        return f"ip netns is not usable here: {result.stderr.strip()}"
    return None


def _run(*argv, check=True):
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True,
                                timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NetworkError(f"{' '.join(argv)}: {error}") from error
    if check and result.returncode != 0:
        raise NetworkError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


class PodNetwork:
    """Namespaces for pods, added one by one with add(); see the module doc."""

    def __init__(self):
        self._lock = open(LOCK_PATH, "w", encoding="utf-8")
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self._lock.close()
                    raise NetworkError(f"{LOCK_PATH} held by another run for {LOCK_TIMEOUT_S} s")
                time.sleep(0.2)
        self.namespaces = []  # (namespace, address)
        try:
            self._remove_leftovers()
            _run("ip", "link", "add", BRIDGE, "type", "bridge")
            _run("ip", "addr", "add", f"{self.bridge_address}/24", "dev", BRIDGE)
            _run("ip", "link", "set", BRIDGE, "up")
        except Exception:
            self.close()
            raise

    @property
    def bridge_address(self):
        return f"{SUBNET}254"

    def add(self):
        """A new namespace with its address; returns (namespace name, IPv4 address)."""
        number = len(self.namespaces)
        if number >= MAX_PODS:
            raise NetworkError(f"more than {MAX_PODS} pods")
        namespace, veth, address = f"{PREFIX}p{number}", f"{PREFIX}v{number}", f"{SUBNET}{number + 10}"
        self.namespaces.append((namespace, address))
        _run("ip", "netns", "add", namespace)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _run("ip", "link", "set", veth, "master", BRIDGE)
        _run("ip", "link", "set", veth, "up")
        _run("ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        _run("ip", "-n", namespace, "link", "set", "eth0", "up")
        _run("ip", "-n", namespace, "link", "set", "lo", "up")
        return namespace, address

    def set_hosts(self, entries):
        """Every namespace's /etc/hosts: localhost plus `entries` ((address, [names]) pairs)."""
        lines = ["127.0.0.1 localhost", "::1 localhost"]
        lines += [f"{address} {' '.join(names)}" for address, names in entries]
        for namespace, _ in self.namespaces:
            folder = f"/etc/netns/{namespace}"
            os.makedirs(folder, exist_ok=True)
            with open(f"{folder}/hosts", "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")

    def command(self, namespace, argv):
        """argv prefixed to run inside `namespace`."""
        return ["ip", "netns", "exec", namespace, *argv]

    def _remove_leftovers(self):
        for line in _run("ip", "netns", "list", check=False).splitlines():
            namespace = line.split(" ")[0]
            if namespace.startswith(f"{PREFIX}p"):
                self._remove_namespace(namespace)
        if os.path.exists(f"/sys/class/net/{BRIDGE}"):
            _run("ip", "link", "del", BRIDGE, check=False)

    @staticmethod
    def _remove_namespace(namespace):
        for pid in _run("ip", "netns", "pids", namespace, check=False).split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        _run("ip", "netns", "del", namespace, check=False)  # takes its veth pair along
        shutil.rmtree(f"/etc/netns/{namespace}", ignore_errors=True)

    def close(self):
        """Kills what runs in the namespaces and removes everything this object made."""
        if self._lock.closed:
            return
        try:
            for namespace, _ in self.namespaces:
                self._remove_namespace(namespace)
            self._remove_leftovers()
            try:
                os.rmdir("/etc/netns")  # only when no other namespace keeps files there
            except OSError:
                pass
        finally:
            self._lock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
