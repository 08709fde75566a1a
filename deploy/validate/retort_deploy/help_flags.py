"""The flags a retort binary accepts, read from its --help output, and command lines checked
against them. The help format (common/args.cc) lists each flag at the start of a line as
`  --name=VALUE` (takes a value) or `  --name` (a switch; --no-name negates it)."""
import os
import re
import subprocess

# The binaries the project builds that manifests and docs may name.
BINARIES = ["retort-coordinator", "retort-worker", "retortctl"]

_FLAG_RE = re.compile(r"^ {2}--([a-z0-9][a-z0-9-]*)(=\S*)?(?=\s|$)", re.M)


class HelpError(Exception):
    """A binary whose --help cannot be read; the message says why."""


def parse_help_flags(help_text):
    """{flag name: takes a value} from help text, in the order listed."""
    return {m.group(1): m.group(2) is not None for m in _FLAG_RE.finditer(help_text)}


def read_help(binary_path, args=()):
    """stdout and stderr of `binary args... --help` (10 s deadline). Raises HelpError when the
    binary is missing, not executable or hangs."""
    if not os.access(binary_path, os.X_OK) or os.path.isdir(binary_path):
        name = os.path.basename(binary_path)
        raise HelpError(f"missing binary {binary_path} (build it: ninja -C <build> {name})")
    command = [str(binary_path), *args, "--help"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HelpError(f"{' '.join(command)}: {error}") from error
    return f"{result.stdout}\n{result.stderr}"


def check_args(args, flags, where):
    """Messages for each unknown or malformed flag in a list of command-line words (positional
    words are skipped). `flags` is parse_help_flags() output."""
    errors = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--"):
            continue
        name, eq, _ = arg[2:].partition("=")
        if name not in flags and name.startswith("no-") and flags.get(name[3:]) is False:
            if eq:
                errors.append(f"{where}: --{name} takes no value")
            continue
        if name not in flags:
            errors.append(f"{where}: unknown flag --{name}")
        elif flags[name] and not eq:
            if i >= len(args) or args[i].startswith("--"):
                errors.append(f"{where}: --{name} needs a value")
            else:
                i += 1
    return errors
