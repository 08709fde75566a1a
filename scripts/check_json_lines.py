#!/usr/bin/env python3
"""Checks that every result file named *.jsonl under the given folders holds one JSON object per
non-empty line (comments and debug dumps belong in text files beside it).
Usage: check_json_lines.py FOLDER...   Exit status 1 naming each bad file and line."""
import json
import pathlib
import sys


def bad_lines(path: pathlib.Path) -> list[str]:
    problems = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"{path}:{number}: not JSON ({e.msg}): {line[:80]}")
            continue
        if not isinstance(value, dict):
            problems.append(f"{path}:{number}: not a JSON object")
    return problems


def main(folders: list[str]) -> int:
    if not folders:
        print(__doc__, file=sys.stderr)
        return 2
    files = sorted(p for f in folders for p in pathlib.Path(f).rglob("*.jsonl"))
    problems = [p for f in files for p in bad_lines(f)]
    for p in problems:
        print(p)
    print(f"{len(files)} files, {len(problems)} bad lines")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
