"""Test helpers: fake retort binaries (shell scripts that print a --help text in the format of
common/args.cc), a fake kubectl, temporary files, and running the checker scripts."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

VALIDATE = Path(__file__).resolve().parents[1]
DEPLOY = VALIDATE.parent
ROOT = DEPLOY.parent


def _flag(name, takes_value=True):
    return f"  --{name}{'=VALUE' if takes_value else ''}\n      {name}\n"


HELP = {
    "retort-coordinator": "Usage: retort-coordinator [flags]\n\nFlags:\n"
    + "".join(
        _flag(f)
        for f in [
            "listen", "state-dir", "job", "heartbeat-interval-ms", "eviction-timeout-ms", "settle-ms",
            "min-workers", "max-workers", "checkpoint-dir", "log-level", "rejoin-grace-ms",
            "metrics-listen", "tls-cert", "tls-key", "tls-ca", "health-listen", "signal-exit-code",
            "linger-after-end-ms",
            "stall-deadline-ms", "port-file",
        ]
    )
    + _flag("no-check-paths", False)
    + _flag("restart-from-scratch", False)
    + _flag("insecure-listen", False)
    + "  --help\n      Show this help and exit.\n",
    "retort-worker": "Usage: retort-worker [flags]\n\nFlags:\n"
    + "".join(
        _flag(f)
        for f in [
            "coordinator", "node", "local-rank", "data-address", "device", "devices", "threads",
            "health-listen", "log-level",
            "metrics-listen", "tls-ca", "tls-cert", "tls-key", "signal-exit-code",
        ]
    )
    + "  --help\n      Show this help and exit.\n",
    "retortctl": "Usage: retortctl [flags] COMMAND [args]\n\nFlags:\n"
    + _flag("coordinator")
    + _flag("json", False)
    + _flag("timeout-ms")
    + _flag("tls-ca")
    + _flag("tls-cert")
    + _flag("tls-key")
    + _flag("out")
    + _flag("hosts")
    + "  --help\n      Show this help and exit.\n\nCommands:\n"
    + "  status\n  watch\n  pause\n  resume\n  checkpoint\n  scale --min N --max N\n  drain ID\n  stop\n"
    + "  certs --out=DIR [--hosts=H,...]\n",
}


def temp_dir(test, prefix):
    """A new temporary folder, removed when `test` (a TestCase) ends."""
    holder = tempfile.TemporaryDirectory(prefix=prefix)
    test.addCleanup(holder.cleanup)
    return Path(holder.name)


def write_executable(path, text):
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


def make_fake_binaries(test, help_texts=None):
    """A folder with fake binaries; `help_texts` maps a binary to its help (None: left out).
    `retortctl scale --help` lists --min and --max, as the real one does."""
    folder = temp_dir(test, "retort-fake-tools-")
    for name, text in (HELP if help_texts is None else help_texts).items():
        if text is None:
            continue
        extra = "  --min=VALUE\n      min\n  --max=VALUE\n      max\n" if name == "retortctl" else ""
        write_executable(
            folder / name,
            f'#!/bin/sh\ncase "$*" in\n  "scale --help") cat <<\'HELP\'\n{extra}HELP\n  ;;\n'
            f"  *) cat <<'HELP'\n{text}HELP\n  ;;\nesac\n",
        )
    return folder


def make_fake_kubectl(test, version_line, render_dir=None):
    """A folder holding a fake kubectl: `kubectl version --client` prints `version_line`;
    `kubectl kustomize DIR` prints render_dir/<basename of DIR>.yaml (fails when missing)."""
    folder = temp_dir(test, "retort-fake-kubectl-")
    (folder / "version.txt").write_text(version_line + "\n", encoding="utf-8")
    write_executable(
        folder / "kubectl",
        "#!/bin/sh\n"
        f'if [ "$1" = version ]; then exec cat "{folder}/version.txt"; fi\n'
        f'if [ "$1" = kustomize ]; then exec cat "{render_dir}/$(basename "$2").yaml"; fi\n'
        "exit 2\n",
    )
    return folder


def write_temp(test, name, text):
    """`text` in a new temporary file named `name`; returns its path."""
    path = temp_dir(test, "retort-manifest-") / name
    path.write_text(text, encoding="utf-8")
    return path


def committed_render(overlay):
    """The committed deploy/k8s/rendered/OVERLAY.yaml."""
    return (DEPLOY / "k8s" / "rendered" / f"{overlay}.yaml").read_text(encoding="utf-8")


def replace_once(test, text, old, new):
    """text with the first `old` replaced by `new`; fails the test when `old` is absent."""
    test.assertIn(old, text)
    return text.replace(old, new, 1)


def assert_fails_naming(test, status, output, patterns):
    """The check exited 1 and its output matches every regular expression in `patterns`."""
    test.assertEqual(status, 1, output)
    for pattern in patterns:
        test.assertRegex(output, pattern)


def run_script(script, *args, env=None, cwd=None):
    """(exit status, stdout + stderr) of a checker script of deploy/validate, run with this
    interpreter."""
    result = subprocess.run(
        [sys.executable, str(VALIDATE / script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


def env_with_path(*folders, system=True):
    """The environment with PATH set to `folders`, followed by /usr/bin and /bin when `system`
    (which may hold a real kubectl: leave them out to test a machine without one)."""
    extra = ["/usr/bin", "/bin"] if system else []
    return {**os.environ, "PATH": os.pathsep.join([*map(str, folders), *extra])}
