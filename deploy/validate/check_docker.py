#!/usr/bin/env python3
"""Usage: check_docker.py [--torch-cuda=X.Y] REPO_ROOT

Static checks of REPO_ROOT/deploy/docker (retort_deploy/docker.py): Dockerfiles, the image
scripts, and every shell script under deploy/; Dockerfile.cuda's CUDA_VERSION against the CUDA
of this Python environment's torch (or --torch-cuda). No Docker engine needed. Exits 1 naming
each problem."""
import argparse
import sys

from retort_deploy.docker import check_docker


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-cuda", help="the CUDA major.minor torch is built for (default: the installed torch's)")
    parser.add_argument("root")
    args = parser.parse_args()
    errors, dockerfiles, scripts = check_docker(args.root, args.torch_cuda)
    for message in errors:
        print(message, file=sys.stderr)
    print(f"check-docker: {dockerfiles} Dockerfiles, {scripts} scripts, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
