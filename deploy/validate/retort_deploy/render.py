"""Rendering the kustomize overlays into the committed files deploy/k8s/rendered/OVERLAY.yaml.

The committed files are what the schema, policy and flag checks validate, so that those run
on machines without kubectl. Each starts with a header naming its overlay and a SHA-256 of the
kustomize sources (every file under deploy/k8s except rendered/, dot files and `~` backups),
so that a file rendered before a source changed is detected even where kubectl is missing.
"""
import difflib
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

REGENERATE = "deploy/validate/run-checks.sh render-all"
# kubectl embeds kustomize v4+ from 1.21 on; older ones cannot render these kustomizations.
MIN_KUBECTL_MINOR = 21
_DIGEST_RE = re.compile(r"^# sources-sha256: ([0-9a-f]{64})$", re.M)


class RenderError(Exception):
    """kubectl failed or rendered nothing; the message says which overlay and why."""


def overlays(k8s_dir):
    """Names of the overlays (folders of k8s_dir/overlays with a kustomization.yaml), sorted."""
    return sorted(p.parent.name for p in Path(k8s_dir).glob("overlays/*/kustomization.yaml"))


def rendered_path(k8s_dir, overlay):
    return Path(k8s_dir) / "rendered" / f"{overlay}.yaml"


def sources_digest(k8s_dir):
    """SHA-256 over the relative path and content of every kustomize source file."""
    root = Path(k8s_dir)
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root)
        if relative.parts[0] == "rendered" or any(part.startswith(".") for part in relative.parts):
            continue
        if path.name.endswith("~"):
            continue
        digest.update(relative.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def header(overlay, digest):
    return (
        f"# Rendered from deploy/k8s/overlays/{overlay} by `kubectl kustomize`; do not edit. Edit the\n"
        f"# overlay or deploy/k8s/base, then regenerate every overlay: {REGENERATE}\n"
        f"# sources-sha256: {digest}\n"
    )


def recorded_digest(text):
    """The sources digest in a rendered file's header, or None."""
    match = _DIGEST_RE.search(text)
    return match.group(1) if match else None


def kubectl_problem():
    """None when a kubectl that can render the overlays is on PATH, else why not."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return "kubectl not found on PATH"
    try:
        out = subprocess.run(
            [kubectl, "version", "--client"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{kubectl} version --client failed: {error}"
    version = re.search(r'(?:Client Version: v|GitVersion:"v)(\d+)\.(\d+)', out)
    if version is None:
        return f"cannot read the version of {kubectl} (kubectl version --client)"
    major, minor = int(version.group(1)), int(version.group(2))
    if (major, minor) < (1, MIN_KUBECTL_MINOR):
        return f"{kubectl} is {major}.{minor}; kustomize v4+ needs kubectl 1.{MIN_KUBECTL_MINOR} or later"
    return None


def render(k8s_dir, overlay):
    """The full text of rendered/OVERLAY.yaml (header and `kubectl kustomize` output)."""
    folder = Path(k8s_dir) / "overlays" / overlay
    if not (folder / "kustomization.yaml").is_file():
        raise RenderError(f"no overlay {overlay} ({folder}/kustomization.yaml missing)")
    try:
        result = subprocess.run(
            ["kubectl", "kustomize", str(folder)], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise RenderError(f"kubectl kustomize {folder}: {error}") from error
    if result.returncode != 0:
        raise RenderError(f"kubectl kustomize {folder} failed: {result.stderr.strip()}")
    if not result.stdout.strip():
        raise RenderError(f"kubectl kustomize {folder} rendered nothing")
    return header(overlay, sources_digest(k8s_dir)) + result.stdout


def diff(committed, fresh, path):
    """Unified diff from the committed to the freshly rendered text, as lines."""
    return list(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            fromfile=f"{path} (committed)",
            tofile=f"{path} (kubectl kustomize now)",
        )
    )
