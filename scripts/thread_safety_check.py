#!/usr/bin/env python3
"""Runs clang's thread-safety analysis, syntax only, over the translation units that see retort's
lock annotations (common/thread_annotations.h, directly or through any project header).

Reads the compile database of a build directory configured with clang and
RETORT_THREAD_SAFETY_ANALYSIS=ON (scripts/thread-safety-check makes it), builds only what those
units need before they parse (generated headers, precompiled headers), then runs each unit's own
command with -fsyntax-only, several at a time. No object is written and nothing links, so the
check costs a parse per unit.

Exit status: 0 clean, 1 a finding or a unit that does not parse, 2 usage or setup error.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ANNOTATIONS_HEADER = "common/thread_annotations.h"
# Folders whose units are checked: the product always, tests and benchmarks with --all.
PRODUCT_FOLDERS = ("checkpoint", "collectives", "common", "coordinator", "metrics", "models",
                   "rpc", "tools", "trainer", "worker")
TEST_FOLDERS = ("tests", "bench")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
FINDING = re.compile(r"\[-W(error,-W)?thread-safety[a-z-]*\]")


class IncludeGraph:
    """Which project files include the annotations header, transitively (quoted includes only:
    the annotations live in project headers)."""

    def __init__(self, root: Path, include_dirs: list[Path]):
        self.root = root
        self.include_dirs = include_dirs
        self.memo: dict[Path, bool] = {}

    def _resolve(self, including: Path, name: str) -> Path | None:
        for base in [including.parent, *self.include_dirs]:
            candidate = (base / name).resolve()
            if candidate.is_file() and self.root in candidate.parents:
                return candidate
        return None

    def sees_annotations(self, path: Path) -> bool:
        if path in self.memo:
            return self.memo[path]
        self.memo[path] = False  # breaks include cycles (pragma once headers)
        if path == self.root / ANNOTATIONS_HEADER:
            self.memo[path] = True
            return True
        text = path.read_text(errors="replace")
        result = False
        for name in INCLUDE.findall(text):
            target = self._resolve(path, name)
            if target is not None and self.sees_annotations(target):
                result = True
                break
        self.memo[path] = result
        return result


def include_dirs_of(command: list[str], root: Path) -> list[Path]:
    dirs = []
    for i, arg in enumerate(command):
        value = None
        if arg == "-I" and i + 1 < len(command):
            value = command[i + 1]
        elif arg.startswith("-I"):
            value = arg[2:]
        if value:
            path = Path(value).resolve()
            if path == root or root in path.parents:
                dirs.append(path)
    return dirs


def precompiled_headers_of(command: list[str]) -> list[str]:
    """The .pch files a unit's command reads (clang: -Xclang -include-pch -Xclang FILE)."""
    return [command[i + 2] for i, arg in enumerate(command[:-2])
            if arg == "-include-pch" and command[i + 1] == "-Xclang"]


def syntax_only(command: list[str]) -> list[str]:
    """The unit's command with -fsyntax-only instead of writing an object."""
    out = []
    skip = False
    for arg in command:
        if skip:
            skip = False
            continue
        if arg == "-o":
            skip = True
            continue
        if arg == "-c":
            continue
        out.append(arg)
    return out + ["-fsyntax-only"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", required=True, type=Path)
    parser.add_argument("--source-dir", required=True, type=Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--all", action="store_true", help="tests and benchmarks too")
    parser.add_argument("--require", action="append", default=[],
                        help="a folder that must have at least one unit checked (repeatable)")
    args = parser.parse_args()
    root = args.source_dir.resolve()
    database = args.build_dir / "compile_commands.json"
    if not database.is_file():
        print(f"thread-safety-check: {database} is missing (configure with "
              "CMAKE_EXPORT_COMPILE_COMMANDS=ON)", file=sys.stderr)
        return 2
    folders = PRODUCT_FOLDERS + (TEST_FOLDERS if args.all else ())
    units = []
    seen_files = set()
    for entry in json.loads(database.read_text()):
        path = Path(entry["file"]).resolve()
        if path in seen_files or root not in path.parents:
            continue
        relative = path.relative_to(root)
        if relative.parts[0] not in folders or path.suffix != ".cc":
            continue
        command = entry.get("arguments") or shlex.split(entry["command"])
        if "-Werror=thread-safety" not in command:
            print(f"thread-safety-check: {relative} is compiled without -Werror=thread-safety "
                  f"in {database} (configure with RETORT_THREAD_SAFETY_ANALYSIS=ON)",
                  file=sys.stderr)
            return 2
        graph = IncludeGraph(root, include_dirs_of(command, root))
        if graph.sees_annotations(path):
            seen_files.add(path)
            units.append((relative, command, entry["directory"]))
    missing = [f for f in args.require if not any(u[0].parts[0] == f for u in units)]
    if missing:
        print(f"thread-safety-check: no unit of {', '.join(missing)} in {database}: was the "
              "build configured with those parts on?", file=sys.stderr)
        return 2

    # What the units need before they parse: generated headers (the proto library's sources) and
    # the precompiled headers their commands name, built by the build directory's own rules.
    needed = {"generated/retort/v1/retort.pb.h", "generated/retort/v1/retort.grpc.pb.h"}
    for _, command, directory in units:
        for pch in precompiled_headers_of(command):
            needed.add(os.path.relpath(Path(directory) / pch, args.build_dir))
    started = time.monotonic()
    prep = subprocess.run(["ninja", "-C", str(args.build_dir), f"-j{args.jobs}", *sorted(needed)],
                          capture_output=True, text=True)
    if prep.returncode != 0:
        print(prep.stdout[-4000:] + prep.stderr[-4000:])
        print("thread-safety-check: building the generated and precompiled headers failed",
              file=sys.stderr)
        return 1
    print(f"thread-safety-check: {len(units)} units see the annotations; parsing them "
          f"({args.jobs} at a time)", flush=True)

    def check(unit):
        relative, command, directory = unit
        t0 = time.monotonic()
        run = subprocess.run(syntax_only(command), cwd=directory, capture_output=True, text=True)
        return relative, run.returncode, run.stdout + run.stderr, time.monotonic() - t0

    findings = 0
    failed = []
    by_folder: dict[str, int] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for relative, code, output, seconds in pool.map(check, units):
            by_folder[relative.parts[0]] = by_folder.get(relative.parts[0], 0) + 1
            count = len(FINDING.findall(output))
            findings += count
            if code != 0 or count:
                failed.append(str(relative))
                print(f"---- {relative} ({seconds:.0f} s)\n{output}", flush=True)
    summary = ", ".join(f"{folder} {n}" for folder, n in sorted(by_folder.items()))
    elapsed = time.monotonic() - started
    if failed:
        print(f"thread-safety-check: FAILED: {findings} thread-safety finding(s); "
              f"{len(failed)} unit(s) failed: {' '.join(failed)} ({elapsed:.0f} s)")
        return 1
    print(f"thread-safety-check: clean: {len(units)} units ({summary}) in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
