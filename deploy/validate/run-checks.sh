#!/usr/bin/env bash
# Offline validation of everything under deploy/ (run by ctest, label "deploy").
# Usage: deploy/validate/run-checks.sh CHECK [ARGS]
#   render OVERLAY OUT   render deploy/k8s/overlays/OVERLAY with `kubectl kustomize` into OUT
#   schema OVERLAY       render, then validate every object against the Kubernetes API schemas
#   policy OVERLAY       render, then check retort's deployment rules (cpu or gpu overlay)
#   flags BUILD_DIR      entrypoints and flags of every overlay and the README's retortctl lines
#                        against BUILD_DIR/tools/{retort-coordinator,retort-worker,retortctl} --help
#   stage BUILD_DIR      stage BUILD_DIR/tools' binaries as the image build does (all libraries
#                        resolved, owned by packages or vendored, no compiler in the runtime set)
#   yamllint             lint every YAML file under deploy/ (deploy/yamllint.yaml)
#   docker               static checks of deploy/docker (Dockerfiles, image scripts; shellcheck)
#   selftest             the checkers themselves, on fakes and broken manifests
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deploy=$(dirname "$here")
root=$(dirname "$deploy")

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "run-checks: $*" >&2; exit 1; }

need_node() {
  command -v node >/dev/null || die "node not found (run scripts/setup)"
  [[ -f "$here/node_modules/.retort-lock.sha256" ]] ||
    die "npm packages missing in $here/node_modules (run scripts/setup or deploy/validate/install.sh)"
}

render() {
  local overlay=$1 out=$2
  command -v kubectl >/dev/null || die "kubectl not found (needs kubectl 1.21+, with kustomize v4+)"
  [[ -f "$deploy/k8s/overlays/$overlay/kustomization.yaml" ]] || die "no overlay $overlay"
  kubectl kustomize "$deploy/k8s/overlays/$overlay" >"$out" ||
    die "kubectl kustomize deploy/k8s/overlays/$overlay failed (needs kubectl 1.21+, with kustomize v4+)"
  [[ -s "$out" ]] || die "overlay $overlay rendered nothing"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check=${1:-}
shift || true
case "$check" in
  render)
    (($# == 2)) || die "usage: render OVERLAY OUT"
    render "$1" "$2"
    ;;
  schema)
    (($# == 1)) || die "usage: schema OVERLAY"
    need_node
    render "$1" "$tmp/$1.yaml"
    node "$here/validate-schema.mjs" "$tmp/$1.yaml"
    ;;
  policy)
    (($# == 1)) || die "usage: policy OVERLAY"
    need_node
    render "$1" "$tmp/$1.yaml"
    node "$here/check-policy.mjs" --accelerator="$1" "$tmp/$1.yaml"
    ;;
  flags)
    (($# == 1)) || die "usage: flags BUILD_DIR"
    need_node
    rendered=()
    for dir in "$deploy"/k8s/overlays/*/; do
      name=$(basename "$dir")
      render "$name" "$tmp/$name.yaml"
      rendered+=("$tmp/$name.yaml")
    done
    node "$here/check-flags.mjs" --bin-dir="$1/tools" --readme="$deploy/README.md" "${rendered[@]}"
    ;;
  stage)
    (($# == 1)) || die "usage: stage BUILD_DIR"
    RETORT_BUILD_DIR=$1 "$deploy/docker/build-in-container.sh" --stage-only "$root" "$tmp/stage"
    for binary in retort-coordinator retort-worker retortctl; do
      help=$(timeout 10 "$tmp/stage/opt/retort/bin/$binary" --help 2>&1 || true)
      grep -Eq '^  --' <<<"$help" || die "staged $binary does not run: $help"
    done
    ;;
  yamllint)
    command -v yamllint >/dev/null || die "yamllint not found (run scripts/setup)"
    mapfile -t files < <(find "$deploy" -path "$here/node_modules" -prune -o \
      \( -name '*.yaml' -o -name '*.yml' \) -type f -print | sort)
    ((${#files[@]} > 0)) || die "no YAML files under deploy/"
    yamllint --strict -c "$deploy/yamllint.yaml" "${files[@]}"
    echo "yamllint: ${#files[@]} files clean"
    ;;
  docker)
    need_node
    command -v shellcheck >/dev/null || die "shellcheck not found (run scripts/setup)"
    node "$here/check-docker.mjs" "$root"
    mapfile -t scripts < <(find "$deploy" -path "$here/node_modules" -prune -o -name '*.sh' -type f -print | sort)
    shellcheck --shell=bash "${scripts[@]}"
    echo "shellcheck: ${#scripts[@]} scripts clean"
    ;;
  selftest)
    need_node
    node --test "$here"/test/*.test.mjs
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
