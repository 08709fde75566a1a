#!/usr/bin/env python3
"""Usage: check_policy.py --accelerator=cpu|gpu|rdma [--coordinator=PATH] RENDERED.yaml

Checks one rendered overlay against retort's deployment rules (retort_deploy/policy.py) and its
job spec with the coordinator's own rules (PATH/--check-job; default $RETORT_COORDINATOR;
without either the job spec is left unchecked, and the output says so). Prints each violation
as `FILE: message` and exits 1 when there is one, 2 on a usage error."""
import argparse
import os
import sys

from retort_deploy.job_spec import JobSpecChecker
from retort_deploy.manifests import ManifestError, load_manifests
from retort_deploy.policy import check_policy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accelerator", choices=["cpu", "gpu", "rdma"], required=True)
    parser.add_argument("--coordinator", default=os.environ.get("RETORT_COORDINATOR"),
                        help="retort-coordinator binary whose --check-job checks the job spec")
    parser.add_argument("rendered")
    args = parser.parse_args()
    if args.coordinator and not os.access(args.coordinator, os.X_OK):
        parser.error(f"--coordinator={args.coordinator} is not an executable (build it: "
                     "cmake --build build --target retort-coordinator)")
    try:
        objects = load_manifests(args.rendered)
    except ManifestError as error:
        print(error, file=sys.stderr)
        return 1
    checker = JobSpecChecker(args.coordinator) if args.coordinator else None
    errors = check_policy(objects, args.accelerator, checker)
    for message in errors:
        print(f"{args.rendered}: {message}", file=sys.stderr)
    spec = "job spec checked by retort-coordinator" if checker else \
        "job spec NOT checked (no --coordinator)"
    print(f"check-policy ({args.accelerator}): {len(objects)} objects, {len(errors)} problems; {spec}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
