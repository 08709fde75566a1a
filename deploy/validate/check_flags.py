#!/usr/bin/env python3
"""Usage: check_flags.py --bin-dir=DIR [--readme=README.md] RENDERED.yaml...

Checks that every container entrypoint in the rendered manifests is a retort binary installed
at /opt/retort/bin, and that every flag the manifests (and the README's retortctl lines) pass
is listed by that binary's --help. The binaries are read from DIR (the build's tools/ folder);
a missing binary is a failure, not a skip. Exits 1 naming each problem, or when nothing was
checked."""
import argparse
import sys

from retort_deploy.flags import check_flags
from retort_deploy.manifests import ManifestError


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--readme")
    parser.add_argument("rendered", nargs="+")
    args = parser.parse_args()
    try:
        errors, checked = check_flags(args.bin_dir, args.rendered, args.readme)
    except (ManifestError, OSError) as error:
        print(error, file=sys.stderr)
        return 1
    for message in errors:
        print(message, file=sys.stderr)
    print(f"check-flags: {checked} command lines, {len(errors)} problems")
    return 0 if not errors and checked > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
