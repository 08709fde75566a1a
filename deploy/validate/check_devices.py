#!/usr/bin/env python3
"""Usage: check_devices.py --worker=BUILD/tools/retort-worker RENDERED.yaml...

Resolves the training device of every worker pod of the rendered manifests (each pod index
against the pod's nvidia.com/gpu limit) by asking the built retort-worker (--print-device-table),
and checks that it resolves and that --devices names it (retort_deploy/devices.py). Prints each
problem and exits 1 when there is one or when no pod was checked."""
import argparse
import sys

from retort_deploy.devices import check_devices
from retort_deploy.manifests import ManifestError, load_manifests


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", required=True)
    parser.add_argument("rendered", nargs="+")
    args = parser.parse_args()
    problems = 0
    pods = 0
    for path in args.rendered:
        try:
            objects = [o for o in load_manifests(path) if isinstance(o, dict)]
        except ManifestError as error:
            print(error, file=sys.stderr)
            return 1
        errors, checked = check_devices(objects, args.worker)
        for message in errors:
            print(f"{path}: {message}", file=sys.stderr)
        problems += len(errors)
        pods += checked
        print(f"check-devices: {path}: {checked} worker pods, {len(errors)} problems")
    return 0 if problems == 0 and pods > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
