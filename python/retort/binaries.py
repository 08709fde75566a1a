"""Finding retort's programs (retort-coordinator, retort-run, retortctl, retort-worker).

Looked for, in order: the `bin_dir` argument, $RETORT_BIN_DIR, the build folder of the checkout
the package was built from (<checkout>/build/tools, or $RETORT_BUILD_DIR/tools), and PATH.
"""
from __future__ import annotations

import os
import pathlib
import shutil

from .errors import BinaryNotFoundError


def _checkout() -> pathlib.Path | None:
    try:
        from ._build_info import SOURCE_DIR  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    return pathlib.Path(str(SOURCE_DIR))


def candidate_dirs(bin_dir: str | os.PathLike[str] | None = None) -> list[pathlib.Path]:
    dirs = []
    if bin_dir is not None:
        dirs.append(pathlib.Path(bin_dir))
    if os.environ.get("RETORT_BIN_DIR"):
        dirs.append(pathlib.Path(os.environ["RETORT_BIN_DIR"]))
    if os.environ.get("RETORT_BUILD_DIR"):
        dirs.append(pathlib.Path(os.environ["RETORT_BUILD_DIR"]) / "tools")
    checkout = _checkout()
    if checkout is not None:
        dirs.append(checkout / "build" / "tools")
    return dirs


def find(name: str, bin_dir: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """The path of program `name`, or BinaryNotFoundError saying where it looked and how to
    build it."""
    looked = candidate_dirs(bin_dir)
    for d in looked:
        path = d / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
    on_path = shutil.which(name)
    if on_path:
        return pathlib.Path(on_path)
    checkout = _checkout()
    how = (f"build it: cd {checkout} && scripts/build (or cmake --build build --target {name})"
           if checkout else "build it with scripts/build in a retort checkout")
    raise BinaryNotFoundError(
        f"{name} not found (looked in {', '.join(str(d) for d in looked) or 'no build folder'} "
        f"and PATH); {how}, or pass bin_dir= / set RETORT_BIN_DIR")
