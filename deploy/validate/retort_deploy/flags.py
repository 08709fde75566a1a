"""Container entrypoints and flags of rendered manifests, and the retortctl lines of a README,
checked against the --help of the binaries a build produced."""
import posixpath
import re

from .help_flags import BINARIES, HelpError, check_args, parse_help_flags, read_help
from .manifests import containers_of, describe, items, load_manifests

_README_LINE = re.compile(r"^\s*(?:\$\s+)?retortctl\s+(.*)$")


class _Helps:
    """`binary [subcommand] --help` of the binaries in one folder, read once each. A binary
    whose help cannot be read (or lists no flag) is an error; a subcommand's is not (not every
    subcommand has flags of its own)."""

    def __init__(self, bin_dir, errors):
        self.bin_dir = bin_dir
        self.errors = errors
        self.cache = {}

    def get(self, binary, subcommand=None):
        """(help text, flags) or None."""
        key = (binary, subcommand)
        if key not in self.cache:
            try:
                text = read_help(f"{self.bin_dir}/{binary}", [subcommand] if subcommand else [])
                flags = parse_help_flags(text)
                if not flags:
                    raise HelpError(f"{binary} --help lists no flags")
                self.cache[key] = (text, flags)
            except HelpError as error:
                self.cache[key] = None
                if subcommand is None:
                    self.errors.append(str(error))
        return self.cache[key]


def _check_manifest(path, helps, errors):
    """Entrypoints and args of every container in one rendered file; returns how many
    containers were checked against a binary's help."""
    checked = 0
    for obj in load_manifests(path):
        for container in containers_of(obj):
            where = f"{path}: {describe(obj)} container {container.get('name')}"
            command = items(container.get("command"))
            if len(command) != 1:
                errors.append(f"{where}: command must be exactly the binary (flags go in args)")
                continue
            binary = posixpath.basename(str(command[0]))
            if binary not in BINARIES or command[0] != f"/opt/retort/bin/{binary}":
                errors.append(f"{where}: entrypoint {command[0]} is not /opt/retort/bin/<one of {', '.join(BINARIES)}>")
                continue
            help_ = helps.get(binary)
            if help_ is None:
                continue
            errors.extend(check_args([str(a) for a in items(container.get("args"))], help_[1], where))
            checked += 1
    return checked


def _check_readme(path, helps, errors):
    """retortctl invocations in a README: global flags from `retortctl --help`, subcommand
    flags from `retortctl SUB --help` where it lists its own. Returns the lines checked."""
    checked = 0
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, start=1):
        match = _README_LINE.match(line)
        if not match:
            continue
        where = f"{path}:{number}"
        words = re.sub(r"\s+#.*$", "", match.group(1)).split()
        global_help = helps.get("retortctl")
        if global_help is None:
            break
        text, global_flags = global_help
        subcommand = next(
            (
                w
                for i, w in enumerate(words)
                if not w.startswith("-")
                and not (i > 0 and re.fullmatch(r"--[\w-]+", words[i - 1]) and global_flags.get(words[i - 1][2:]))
            ),
            None,
        )
        if subcommand is None or not re.search(rf"(^|\s){re.escape(subcommand)}(\s|$)", text, re.M):
            errors.append(f'{where}: retortctl subcommand "{subcommand}" is not in retortctl --help')
            continue
        own = helps.get("retortctl", subcommand)
        flags = {**global_flags, **(own[1] if own else {})}
        errors.extend(check_args(words, flags, where))
        checked += 1
    return checked


def check_flags(bin_dir, rendered, readme=None):
    """(error messages, command lines checked) for rendered manifest files and an optional
    README, against the binaries in bin_dir. A missing binary is an error, not a skip."""
    errors = []
    helps = _Helps(bin_dir, errors)
    checked = sum(_check_manifest(path, helps, errors) for path in rendered)
    if readme:
        checked += _check_readme(readme, helps, errors)
    return errors, checked
