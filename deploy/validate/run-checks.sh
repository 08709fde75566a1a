#!/usr/bin/env bash
# Offline validation of everything under deploy/ (run by ctest, label "deploy").
# Usage: deploy/validate/run-checks.sh CHECK [ARGS]
#   schema OVERLAY       every object of deploy/k8s/rendered/OVERLAY.yaml against the strict
#                        Kubernetes API schemas (version: retort_deploy/schema.py)
#   policy OVERLAY [BUILD_DIR]  retort's deployment rules on deploy/k8s/rendered/OVERLAY.yaml
#                        (cpu, gpu or rdma); the job spec by BUILD_DIR/tools/retort-coordinator --check-job
#                        (the coordinator's own rules; without BUILD_DIR it is left unchecked)
#   flags BUILD_DIR      entrypoints and flags of every rendered overlay and the README's retortctl
#                        lines against BUILD_DIR/tools/{retort-coordinator,retort-worker,retortctl} --help
#   devices BUILD_DIR    the training device of every worker pod of every rendered overlay (each
#                        pod index against its nvidia.com/gpu limit), asked of
#                        BUILD_DIR/tools/retort-worker; then the check's self-test on broken copies
#   stage BUILD_DIR      stage BUILD_DIR/tools' binaries as the image build does (all libraries
#                        resolved, owned by packages or vendored, no compiler in the runtime set)
#   run OVERLAY BUILD_DIR  run what deploy/k8s/rendered/OVERLAY.yaml says with BUILD_DIR/tools'
#                        binaries: each pod a process in a network namespace of its own, a short
#                        job to completion (run_manifests.py); exit 77 (skipped) without root or
#                        `ip netns`
#   run-selftest BUILD_DIR  run_manifests.py must fail on broken copies of the cpu render (77 as run)
#   render OVERLAY       deploy/k8s/rendered/OVERLAY.yaml equals a fresh `kubectl kustomize`;
#                        exit 77 (skipped) without kubectl 1.21+, unless the file is provably stale
#   render-all           regenerate deploy/k8s/rendered/*.yaml with `kubectl kustomize` (kubectl 1.21+)
#   yamllint             lint every YAML source under deploy/ (deploy/yamllint.yaml; not rendered/)
#   docker               static checks of deploy/docker (Dockerfiles, image scripts; shellcheck)
#   selftest [BUILD_DIR] the checkers themselves (python -m unittest), on fakes and broken manifests
#                        (the job spec tests with BUILD_DIR/tools/retort-coordinator)
# Needs the project's Python environment ($root/.venv, made by scripts/setup) with the packages
# of scripts/python-requirements.txt, and shellcheck for `docker`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deploy=$(dirname "$here")
root=$(dirname "$deploy")
python=$root/.venv/bin/python3 # the project's Python environment (scripts/setup)

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "run-checks: $*" >&2; exit 1; }

# Stops with the fix unless $python exists and has the validators' packages.
need_python() {
  [[ -x "$python" ]] || die "no Python environment at $root/.venv (run scripts/setup)"
  "$python" -c 'import kubernetes_validate, yamllint, yaml, jsonschema, referencing' 2>/dev/null ||
    die "Python packages missing in $root/.venv (run scripts/setup; see scripts/python-requirements.txt)"
}

# Path of the committed render of an overlay; dies naming the regeneration command when missing.
rendered() {
  local file="$deploy/k8s/rendered/$1.yaml"
  [[ -f "$deploy/k8s/overlays/$1/kustomization.yaml" ]] || die "no overlay $1"
  [[ -f "$file" ]] || die "$file missing (run deploy/validate/run-checks.sh render-all)"
  echo "$file"
}

# BUILD_DIR/tools/retort-coordinator (its --check-job applies the job-spec rules), or dies.
coordinator_binary() {
  local binary
  binary="$(cd "$1" 2>/dev/null && pwd)/tools/retort-coordinator"
  [[ -x "$binary" ]] || die "$1/tools/retort-coordinator not built (cmake --build $1 --target retort-coordinator)"
  echo "$binary"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check=${1:-}
shift || true
case "$check" in
  schema)
    (($# == 1)) || die "usage: schema OVERLAY"
    need_python
    file=$(rendered "$1")
    "$python" "$here/check_schema.py" "$file"
    ;;
  policy)
    (($# == 1 || $# == 2)) || die "usage: policy OVERLAY [BUILD_DIR]"
    need_python
    file=$(rendered "$1")
    coordinator=()
    (($# == 2)) && coordinator=(--coordinator="$(coordinator_binary "$2")")
    "$python" "$here/check_policy.py" --accelerator="$1" "${coordinator[@]}" "$file"
    ;;
  flags)
    (($# == 1)) || die "usage: flags BUILD_DIR"
    need_python
    files=()
    for dir in "$deploy"/k8s/overlays/*/; do
      files+=("$(rendered "$(basename "$dir")")")
    done
    "$python" "$here/check_flags.py" --bin-dir="$1/tools" --readme="$deploy/README.md" "${files[@]}"
    ;;
  devices)
    (($# == 1)) || die "usage: devices BUILD_DIR"
    need_python
    [[ -x "$1/tools/retort-worker" ]] || die "missing binary $1/tools/retort-worker (build it: ninja -C $1 retort-worker)"
    worker=$(cd "$1/tools" && pwd)/retort-worker
    files=()
    for dir in "$deploy"/k8s/overlays/*/; do
      files+=("$(rendered "$(basename "$dir")")")
    done
    "$python" "$here/check_devices.py" --worker="$worker" "${files[@]}"
    cd "$here"
    RETORT_WORKER=$worker "$python" -m unittest --buffer tests.devices_selftest
    ;;
  stage)
    (($# == 1)) || die "usage: stage BUILD_DIR"
    RETORT_BUILD_DIR=$1 "$deploy/docker/build-in-container.sh" --stage-only "$root" "$tmp/stage"
    for binary in retort-coordinator retort-worker retortctl; do
      help=$(timeout 10 "$tmp/stage/opt/retort/bin/$binary" --help 2>&1 || true)
      grep -Eq '^  --' <<<"$help" || die "staged $binary does not run: $help"
    done
    ;;
  run)
    (($# == 2)) || die "usage: run OVERLAY BUILD_DIR"
    need_python
    file=$(rendered "$1")
    [[ -d "$2/tools" ]] || die "no $2/tools (a build with the control plane)"
    bin_dir=$(cd "$2/tools" && pwd)
    cd "$here"
    "$python" run_manifests.py --bin-dir="$bin_dir" "$file"
    ;;
  run-selftest)
    (($# == 1)) || die "usage: run-selftest BUILD_DIR"
    need_python
    cd "$here"
    reason=$("$python" -c 'from retort_deploy.netns import unavailable_reason; print(unavailable_reason() or "")')
    if [[ -n "$reason" ]]; then
      echo "run-selftest: SKIPPED: $reason"
      exit 77
    fi
    RETORT_BIN_DIR=$(cd "$1/tools" && pwd) "$python" -m unittest --buffer tests.run_selftest
    ;;
  render)
    (($# == 1)) || die "usage: render OVERLAY"
    need_python
    cd "$root"
    "$python" "$here/render.py" check deploy/k8s "$1"
    ;;
  render-all)
    (($# == 0)) || die "usage: render-all"
    need_python
    cd "$root"
    "$python" "$here/render.py" write deploy/k8s
    ;;
  yamllint)
    need_python
    # deploy/k8s/rendered/ holds kubectl's output (generated, in kubectl's own layout).
    mapfile -t files < <(find "$deploy" -path "$deploy/k8s/rendered" -prune -o \
      \( -name '*.yaml' -o -name '*.yml' \) -type f -print | sort)
    ((${#files[@]} > 0)) || die "no YAML files under deploy/"
    "$python" -m yamllint --strict -c "$deploy/yamllint.yaml" "${files[@]}"
    echo "yamllint: ${#files[@]} files clean"
    ;;
  docker)
    need_python
    command -v shellcheck >/dev/null || die "shellcheck not found (apt-get install shellcheck; run scripts/setup)"
    "$python" "$here/check_docker.py" "$root"
    mapfile -t scripts < <(find "$deploy" -name '*.sh' -type f -print | sort)
    shellcheck --shell=bash "${scripts[@]}"
    echo "shellcheck: ${#scripts[@]} scripts clean"
    ;;
  selftest)
    (($# <= 1)) || die "usage: selftest [BUILD_DIR]"
    need_python
    if (($# == 1)); then
      RETORT_COORDINATOR=$(coordinator_binary "$1")
      export RETORT_COORDINATOR
    fi
    cd "$here"
    "$python" -m unittest discover --start-directory tests --top-level-directory . --buffer
    ;;
  -h | --help | "")
    usage
    [[ -n "$check" ]] || exit 2
    ;;
  *)
    usage >&2
    die "unknown check: $check"
    ;;
esac
