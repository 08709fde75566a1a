"""One CUDA version: the CUDA image (deploy/docker/Dockerfile.cuda, build argument
CUDA_VERSION) is the CUDA release the project builds against, which is the CUDA of the torch
wheel pinned in scripts/python-requirements.txt (its LibTorch is what CMake links), read from
the project's Python environment.

torch_cuda_version() reads torch/version.py without importing torch (fast, no GPU libraries
loaded). check_cuda_version() compares major.minor and returns error messages (empty when they
agree); a torch without CUDA, or none, is an error: the version cannot be confirmed.
"""
import importlib.util
import re
from pathlib import Path

_ARG_RE = re.compile(r"^ARG CUDA_VERSION=(\d+)\.(\d+)(?:\.\d+)?\s*$", re.M)
_TORCH_RE = re.compile(r"^cuda(?:\s*:[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", re.M)


def torch_cuda_version():
    """(major.minor of the installed torch's CUDA, None) or (None, why not)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None, "torch is not installed in this Python environment (scripts/setup)"
    version_file = Path(spec.submodule_search_locations[0]) / "version.py"
    try:
        text = version_file.read_text(encoding="utf-8")
    except OSError as error:
        return None, f"{version_file}: {error.strerror}"
    match = _TORCH_RE.search(text)
    if match is None:
        return None, f"{version_file}: torch is a build without CUDA"
    return ".".join(match.group(1).split(".")[:2]), None


def check_cuda_version(dockerfile_text, where, torch_cuda=None):
    """Messages when Dockerfile.cuda's CUDA_VERSION is not the torch's CUDA (`torch_cuda`
    major.minor; None: read from the installed torch)."""
    match = _ARG_RE.search(dockerfile_text)
    if match is None:
        return [f"{where}: needs one build argument ARG CUDA_VERSION=X.Y.Z (the CUDA release)"]
    if torch_cuda is None:
        torch_cuda, why = torch_cuda_version()
        if torch_cuda is None:
            return [f"{where}: cannot confirm CUDA_VERSION: {why}"]
    image = f"{match.group(1)}.{match.group(2)}"
    if image != torch_cuda:
        return [f"{where}: CUDA_VERSION is CUDA {image}, but the project builds against torch's "
                f"LibTorch for CUDA {torch_cuda} (scripts/python-requirements.txt): make them one"]
    return []
