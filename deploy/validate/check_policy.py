#!/usr/bin/env python3
"""Usage: check_policy.py --accelerator=cpu|gpu RENDERED.yaml

Checks one rendered overlay against retort's deployment rules (retort_deploy/policy.py) and its
job spec against proto/retort/v1/retort.proto. Prints each violation as `FILE: message` and
exits 1 when there is one, 2 on a usage error."""
import argparse
import pathlib
import sys

from retort_deploy.job_spec import parse_proto_messages
from retort_deploy.manifests import ManifestError, load_manifests
from retort_deploy.policy import check_policy

PROTO = pathlib.Path(__file__).resolve().parents[2] / "proto" / "retort" / "v1" / "retort.proto"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accelerator", choices=["cpu", "gpu"], required=True)
    parser.add_argument("rendered")
    args = parser.parse_args()
    try:
        objects = load_manifests(args.rendered)
    except ManifestError as error:
        print(error, file=sys.stderr)
        return 1
    errors = check_policy(objects, args.accelerator, parse_proto_messages(PROTO))
    for message in errors:
        print(f"{args.rendered}: {message}", file=sys.stderr)
    print(f"check-policy ({args.accelerator}): {len(objects)} objects, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
