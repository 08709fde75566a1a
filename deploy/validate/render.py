#!/usr/bin/env python3
"""Usage: render.py write K8S_DIR [OVERLAY...]
       render.py check K8S_DIR OVERLAY

write: renders each overlay (all when none is named) with `kubectl kustomize` into
  K8S_DIR/rendered/OVERLAY.yaml; writing all also removes rendered files without an overlay.
check: compares K8S_DIR/rendered/OVERLAY.yaml with a fresh render. Exits 0 when they match,
  1 with a diff and the command that regenerates them when not (or when the file is missing),
  and 77 (skipped) when no usable kubectl is on PATH, unless the file's recorded sources digest
  already shows it stale (then 1)."""
import argparse
import sys
from pathlib import Path

from retort_deploy import render as r

SKIPPED = 77
MAX_DIFF_LINES = 200


def write(k8s_dir, names):
    problem = r.kubectl_problem()
    if problem:
        print(f"render: {problem}", file=sys.stderr)
        return 1
    all_overlays = r.overlays(k8s_dir)
    for name in names or all_overlays:
        try:
            text = r.render(k8s_dir, name)
        except r.RenderError as error:
            print(f"render: {error}", file=sys.stderr)
            return 1
        path = r.rendered_path(k8s_dir, name)
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"render: wrote {path}")
    if not names:
        for stale in sorted((Path(k8s_dir) / "rendered").glob("*.yaml")):
            if stale.stem not in all_overlays:
                stale.unlink()
                print(f"render: removed {stale} (no such overlay)")
    return 0


def check(k8s_dir, overlay):
    path = r.rendered_path(k8s_dir, overlay)
    if not path.is_file():
        print(f"render: {path} missing; create it with {r.REGENERATE}", file=sys.stderr)
        return 1
    committed = path.read_text(encoding="utf-8")
    problem = r.kubectl_problem()
    if problem:
        if r.recorded_digest(committed) != r.sources_digest(k8s_dir):
            print(
                f"render: {path} is stale: deploy/k8s changed after it was rendered. Regenerate it "
                f"where kubectl 1.{r.MIN_KUBECTL_MINOR}+ is installed: {r.REGENERATE}",
                file=sys.stderr,
            )
            return 1
        print(f"render: SKIPPED: {problem}; cannot compare {path} with a fresh render")
        return SKIPPED
    try:
        fresh = r.render(k8s_dir, overlay)
    except r.RenderError as error:
        print(f"render: {error}", file=sys.stderr)
        return 1
    if fresh == committed:
        print(f"render: {path} matches kubectl kustomize deploy/k8s/overlays/{overlay}")
        return 0
    lines = r.diff(committed, fresh, path)
    sys.stderr.writelines(lines[:MAX_DIFF_LINES])
    if len(lines) > MAX_DIFF_LINES:
        print(f"... {len(lines) - MAX_DIFF_LINES} more diff lines", file=sys.stderr)
    print(f"render: {path} differs from a fresh render (above); regenerate: {r.REGENERATE}", file=sys.stderr)
    return 1


def main():
    parser = argparse.ArgumentParser(description="Render the kustomize overlays or check the committed renders.")
    parser.add_argument("action", choices=["write", "check"])
    parser.add_argument("k8s_dir")
    parser.add_argument("overlays", nargs="*")
    args = parser.parse_args()
    if args.action == "check":
        if len(args.overlays) != 1:
            parser.error("check takes one OVERLAY")
        return check(args.k8s_dir, args.overlays[0])
    return write(args.k8s_dir, args.overlays)


if __name__ == "__main__":
    sys.exit(main())
