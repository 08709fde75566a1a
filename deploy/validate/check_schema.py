#!/usr/bin/env python3
"""Usage: check_schema.py RENDERED.yaml...

Validates every object of rendered manifests against the strict Kubernetes API schemas of
retort_deploy.schema.KUBERNETES_VERSION (types, required fields, enums, no unknown field at any
depth). Prints each problem as `FILE: Kind/name: path: message`; exits 1 when there is one or
when the files hold no object."""
import argparse
import sys

from retort_deploy.manifests import ManifestError, load_manifests
from retort_deploy.schema import KUBERNETES_VERSION, validate_object


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rendered", nargs="+")
    args = parser.parse_args()
    count = problems = 0
    for path in args.rendered:
        try:
            objects = load_manifests(path)
        except ManifestError as error:
            print(error, file=sys.stderr)
            return 1
        for obj in objects:
            count += 1
            for message in validate_object(obj):
                print(f"{path}: {message}", file=sys.stderr)
                problems += 1
    if count == 0:
        print("check-schema: no objects to validate", file=sys.stderr)
        return 1
    print(f"check-schema (Kubernetes {KUBERNETES_VERSION}, strict): {count} objects, {problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
