"""A small Dockerfile reader: instructions with their arguments (continuation lines joined,
comments dropped) grouped into stages. Enough for static checks; not a full parser."""
import json
import re
from dataclasses import dataclass, field


@dataclass
class Instruction:
    keyword: str  # upper case, e.g. "COPY"
    args: str  # the rest of the instruction, continuation lines joined with spaces
    line: int  # 1-based line of the instruction's first line


@dataclass
class Stage:
    base: str  # the FROM image (may use ARGs), or None when FROM is malformed
    name: str  # the `AS name`, or None
    line: int
    instructions: list = field(default_factory=list)


def _instructions(text):
    result = []
    pending = None  # [text, line]
    for index, raw in enumerate(text.split("\n")):
        line = raw.removesuffix("\r")
        comment = re.match(r"^\s*#", line) is not None
        if comment or (pending is None and line.strip() == ""):
            continue
        continued = re.search(r"\\\s*$", line) is not None
        body = re.sub(r"\\\s*$", "", line)
        if pending is None:
            pending = [body, index + 1]
        else:
            pending[0] += " " + body.strip()
        if not continued:
            match = re.match(r"^\s*(\w+)\s*(.*)$", pending[0], re.S)
            keyword, args = (match.group(1).upper(), match.group(2).strip()) if match else ("", pending[0].strip())
            result.append(Instruction(keyword, args, pending[1]))
            pending = None
    return result


def parse_dockerfile(text):
    """(ARG names declared before the first FROM, [Stage])."""
    global_args = []
    stages = []
    for instruction in _instructions(text):
        if instruction.keyword == "FROM":
            m = re.match(r"^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", instruction.args, re.I)
            stages.append(Stage(m.group(1) if m else None, m.group(2) if m else None, instruction.line))
        elif not stages:
            if instruction.keyword == "ARG":
                global_args.append(instruction.args.split("=")[0])
        else:
            stages[-1].instructions.append(instruction)
    return global_args, stages


def copy_parts(args):
    """(flags {name: value or True}, sources, destination) of COPY/ADD arguments, shell or
    exec (JSON) form. Raises ValueError on a malformed exec form."""
    words = json.loads(args) if args.strip().startswith("[") else args.split()
    words = [str(w) for w in words]
    flags = {}
    while words and words[0].startswith("--"):
        key, _, value = words.pop(0)[2:].partition("=")
        flags[key] = value.split("=")[0] if value else True
    return flags, words[:-1], (words[-1] if words else None)
