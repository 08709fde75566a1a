#!/usr/bin/env bash
# Installs the validators' npm packages (package-lock.json) into deploy/validate/node_modules.
# A fast no-op when the installed tree matches the lock file. Needs the npm registry only when
# it installs; the checks themselves run offline.
# Usage: deploy/validate/install.sh [--help]
set -euo pipefail
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
  sed -n '2,5p' "$0" | sed 's/^# //'
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
stamp="$here/node_modules/.retort-lock.sha256"
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "deploy/validate: npm packages present"
  exit 0
fi
echo "deploy/validate: installing npm packages"
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
echo "$want" >"$stamp"
