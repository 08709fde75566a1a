# shellcheck shell=bash
# Sourced by scripts and benchmarks: sets retort_python, the project's one Python interpreter
# (the environment scripts/setup makes, linked as <checkout>/.venv), or stops with the fix.
retort_python="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv/bin/python3"
if [[ ! -x "$retort_python" ]]; then
  echo "no Python environment at ${retort_python%/bin/python3} (run scripts/setup)" >&2
  exit 1
fi
