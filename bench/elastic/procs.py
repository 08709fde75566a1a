"""Process helpers for the recovery benchmark: every child runs in its own session (so its whole
process group can be killed), its stdout+stderr are written to a log file with the receive time
of each line in Unix milliseconds, and every group still alive is killed when the benchmark
exits (normally, by exception, or by SIGINT/SIGTERM).

Threading: one reader thread per child writes that child's log; everything else runs on the
caller's thread.
"""
import atexit
import json
import os
import signal
import subprocess
import threading
import time


def now_ms():
    return int(time.time() * 1000)


class Child:
    """One started process; `log_path` holds lines "UNIX_MS original line"."""

    def __init__(self, name, argv, log_path, env=None):
        self.name, self.log_path = name, log_path
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.pid = self.proc.pid
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        with open(self.log_path, "w") as log:
            for raw in self.proc.stdout:
                log.write("%d %s" % (now_ms(), raw.decode("utf-8", "replace")))
                log.flush()

    def wait(self, timeout_s):
        """Exit code, or None when still running after timeout_s."""
        try:
            return self.proc.wait(timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            return None

    def kill_group(self):
        if self.proc.poll() is None or _group_alive(self.pid):
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self._reader.join(timeout=5)

    def log_lines(self):
        """[(unix_ms, text)] of what the child printed so far."""
        out = []
        try:
            with open(self.log_path) as f:
                for line in f:
                    ms, _, text = line.partition(" ")
                    if ms.isdigit():
                        out.append((int(ms), text.rstrip("\n")))
        except FileNotFoundError:
            pass
        return out


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class Children:
    """Owns the started children; kills every process group on cleanup()."""

    def __init__(self):
        self.children = []
        atexit.register(self.cleanup)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        self.cleanup()
        raise SystemExit(128 + signum)

    def start(self, name, argv, log_path, env=None):
        child = Child(name, argv, log_path, env)
        self.children.append(child)
        return child

    def cleanup(self):
        for child in self.children:
            child.kill_group()
        self.children = []


def read_jsonl(path):
    """Complete JSON lines of `path` (a partially written last line is ignored)."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    break
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    except FileNotFoundError:
        pass
    return rows


def wait_until(predicate, timeout_s, interval_s=0.01):
    """Polls predicate() until it returns a truthy value (returned) or timeout_s passes (None)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    return None
