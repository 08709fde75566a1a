#!/usr/bin/env python3
"""Prints a short digest of the tests that failed in the last ctest run of a build directory.

Usage: scripts/failure-digest.py BUILD_DIR [--lines N]

ctest --output-on-failure prints a failing test's whole output where the test ran, in the middle
of a long run; a reader that sees only the start and the end of the run's output (a CI summary)
then misses why it failed. This digest is printed last: for each failed test, the lines that say
why (gtest failures, sanitizer summaries, error lines, scripts' verdict lines) and the last N
lines of its output. It reads Testing/Temporary/LastTestsFailed.log and LastTest.log and prints
nothing when no test failed. Exits 0 unless its arguments are wrong.
"""
import argparse
import pathlib
import re
import sys

# Lines that usually say why a test failed, wherever they are in its output.
REASON = re.compile(
    r"\[  FAILED  \]|Failure$|WARNING: (Thread|Address|Leak)Sanitizer|"
    r"^SUMMARY: |ERROR: |FAILED:|Timeout|timed out|Segmentation|Aborted|terminate called|"
    r"^sanitize: |^== ")
MAX_REASON_LINES = 40
TESTING = re.compile(r"^\d+/\d+ Testing: (.+)$")


def failed_test_names(temp_dir):
    path = temp_dir / "LastTestsFailed.log"
    if not path.exists():
        return []
    names = []
    for line in path.read_text(errors="replace").splitlines():
        _, _, name = line.partition(":")
        if name:
            names.append(name)
    return names


def test_outputs(log_text):
    """Maps a test's name to its output, from ctest's LastTest.log."""
    outputs = {}
    name, output = None, None
    lines = log_text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        testing = TESTING.match(line)
        if testing:
            name, output = testing.group(1).strip(), None
        elif name is not None and output is None and line == "Output:":
            output = []
            i += 1  # the dashed rule under "Output:"
        elif output is not None:
            if line.startswith("<end of output>"):
                outputs[name] = "\n".join(output)
                name, output = None, None
            else:
                output.append(line)
        i += 1
    return outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build_dir", type=pathlib.Path)
    parser.add_argument("--lines", type=int, default=25, help="tail lines per failed test")
    args = parser.parse_args()
    temp_dir = args.build_dir / "Testing" / "Temporary"
    names = failed_test_names(temp_dir)
    if not names:
        return 0
    log_path = temp_dir / "LastTest.log"
    outputs = test_outputs(log_path.read_text(errors="replace")) if log_path.exists() else {}
    print(f"\n==== failure digest: {len(names)} failed test(s) ({log_path})")
    for name in names:
        output = outputs.get(name)
        print(f"---- {name}")
        if output is None:
            print("  (no output recorded in LastTest.log)")
            continue
        lines = output.rstrip("\n").splitlines()
        reasons = [line for line in lines if REASON.search(line)]
        if reasons:
            print(f"  lines that say why ({min(len(reasons), MAX_REASON_LINES)} of {len(reasons)}):")
            for line in reasons[:MAX_REASON_LINES]:
                print(f"  | {line}")
        print(f"  last {min(args.lines, len(lines))} of {len(lines)} lines:")
        for line in lines[-args.lines:]:
            print(f"  | {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
