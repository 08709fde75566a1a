"""Static checks of deploy/docker, without a Docker engine.

Every Dockerfile is multi-stage; every COPY source exists in the repository (the build context)
or names an earlier stage or a build context that build-image.sh passes; the build stage copies
every folder the top-level CMakeLists.txt adds; the final stage copies only from the build
stage, installs no compiler, runs as a non-root USER and starts a retort binary that
build-in-container.sh installs; nothing secret is baked in; every shell script under deploy/
parses (bash -n) and is executable.
"""
import json
import os
import re
import subprocess
from pathlib import Path

from .cuda_version import check_cuda_version
from .dockerfile import copy_parts, parse_dockerfile
from .help_flags import BINARIES

_SECRET_ASSIGNMENT = re.compile(r"\b\w*(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|PRIVATE_KEY)\w*\s*=", re.I)
_BUILD_TOOL = re.compile(
    r"(^|[\s;&|])(build-essential|g\+\+|gcc|clang|cmake|ninja-build|cuda-toolkit\S*|[\w.+-]+-dev)(?=$|[\s;&|])"
)
_SECRET_SOURCE = re.compile(r"secret|token|\.pem$|\.key$|credentials", re.I)


def _needed_sources(cmake_text, disabled):
    """Folders and files the top-level CMakeLists.txt needs, in order. Subdirectories under an
    `if(...)` with a term that build-in-container.sh turns OFF are not needed."""
    needed = ["CMakeLists.txt"]
    conditions = []
    for line in cmake_text.split("\n"):
        opened = re.match(r"^\s*if\((.*)\)\s*$", line)
        if opened:
            conditions.append(opened.group(1))
        elif re.match(r"^\s*endif\(", line) and conditions:
            conditions.pop()
        off = any(term.strip() in disabled for c in conditions for term in re.split(r"\s+AND\s+", c))
        sub = re.search(r"add_subdirectory\((\w+)\)", line)
        if sub and not off and sub.group(1) not in needed:
            needed.append(sub.group(1))
        if re.search(r"(?:include|configure_file)\(cmake/", line) and "cmake" not in needed:
            needed.append("cmake")
    return needed


def _check_stage(where, stages, index, root, named_contexts, errors):
    """Instruction rules of one stage; returns the sources it COPYs from the repository."""
    stage = stages[index]
    earlier = [s.name for s in stages[:index]]
    final = index == len(stages) - 1
    copied = set()
    for ins in stage.instructions:
        at = f"{where}:{ins.line}"
        if ins.keyword == "ADD":
            errors.append(f"{at}: use COPY, not ADD")
        if ins.keyword in ("ENV", "ARG") and _SECRET_ASSIGNMENT.search(ins.args):
            errors.append(f"{at}: {ins.keyword} looks like a secret; mount secrets at run time")
        if ins.keyword == "RUN" and final and _BUILD_TOOL.search(re.sub(r"command -v \S+", "", ins.args)):
            errors.append(f"{at}: the final stage installs build tools")
        if ins.keyword not in ("COPY", "ADD"):
            continue
        try:
            flags, sources, _ = copy_parts(ins.args)
        except ValueError as error:
            errors.append(f"{at}: malformed {ins.keyword}: {error}")
            continue
        if "from" in flags:
            source = flags["from"]
            if source not in earlier and source not in named_contexts:
                errors.append(
                    f"{at}: --from={source} is neither an earlier stage nor a build context build-image.sh passes"
                )
            if final and source not in earlier:
                errors.append(f"{at}: the final stage copies only from the build stage")
            continue
        if final:
            errors.append(f"{at}: the final stage copies only from the build stage, not sources")
        for source in sources:
            if re.search(r"[*?\[]", source):
                errors.append(f"{at}: name COPY sources exactly (no wildcards): {source}")
            elif not (root / source).exists():
                errors.append(f"{at}: COPY source {source} does not exist in the repository")
            if _SECRET_SOURCE.search(source):
                errors.append(f"{at}: COPY of {source} bakes a secret into the image")
            copied.add(source.rstrip("/"))
    return copied


def _check_final_stage(where, final, errors):
    users = [i for i in final.instructions if i.keyword == "USER"]
    if not users or re.match(r"^(0|root)(:|$)", users[-1].args):
        errors.append(f"{where}: final stage must end on a non-root USER")
    after_user = final.instructions[final.instructions.index(users[-1]) + 1:] if users else final.instructions
    if any(i.keyword == "RUN" for i in after_user):
        errors.append(f"{where}: RUN after USER in the final stage (runs as the unprivileged user?)")
    entries = [i for i in final.instructions if i.keyword == "ENTRYPOINT"]
    try:
        entrypoint = json.loads(entries[-1].args) if entries else None
    except ValueError:
        entrypoint = None
    allowed = [f"/opt/retort/bin/{b}" for b in BINARIES]
    if not (isinstance(entrypoint, list) and entrypoint and entrypoint[0] in allowed):
        errors.append(f"{where}: ENTRYPOINT must be an exec-form /opt/retort/bin/<one of {', '.join(BINARIES)}>")
    if not any(
        i.keyword == "COPY" and re.search(r"--from=\S+\s+/stage/opt/retort\s+/opt/retort$", i.args)
        for i in final.instructions
    ):
        errors.append(f"{where}: final stage must COPY /stage/opt/retort from the build stage to /opt/retort")


def _check_dockerfile(path, root, named_contexts, needed, errors):
    where = f"deploy/docker/{path.name}"
    global_args, stages = parse_dockerfile(path.read_text(encoding="utf-8"))
    if len(stages) < 2:
        errors.append(f"{where}: must be multi-stage (build, then a runtime stage)")
        return
    for stage in stages:
        for arg in re.findall(r"\$\{?(\w+)", stage.base or ""):
            if arg not in global_args:
                errors.append(f"{where}:{stage.line}: FROM uses undeclared ARG {arg}")
    for index in range(len(stages)):
        copied = _check_stage(where, stages, index, root, named_contexts, errors)
        if index == 0:
            for item in needed:
                if item not in copied:
                    errors.append(f"{where}: build stage does not COPY {item} (added by the top-level CMakeLists.txt)")
    _check_final_stage(where, stages[-1], errors)
    if not path.with_name(f"{path.name}.dockerignore").exists():
        errors.append(f"{where}: missing {path.name}.dockerignore")


def _check_scripts(root, errors):
    """Every *.sh under deploy/ parses (bash -n) and is executable; returns their paths."""
    scripts = sorted(p for p in (root / "deploy").rglob("*.sh") if p.is_file())
    for script in scripts:
        result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            errors.append(f"{script}: bash -n: {result.stderr.strip()}")
        if not os.access(script, os.X_OK):
            errors.append(f"{script}: not executable")
    return scripts


def check_docker(root, torch_cuda=None):
    """(error messages, Dockerfiles checked, scripts checked) for the repository at `root`;
    `torch_cuda` (major.minor) stands for the installed torch's CUDA when given."""
    root = Path(root)
    docker = root / "deploy" / "docker"
    errors = []

    def read(relative):
        try:
            return (root / relative).read_text(encoding="utf-8")
        except OSError as error:
            errors.append(f"{relative}: {error.strerror}")
            return ""

    build_image = read("deploy/docker/build-image.sh")
    named_contexts = set(re.findall(r'--build-context "?(\w+)=', build_image))
    in_container = read("deploy/docker/build-in-container.sh")
    listed = re.search(r"^binaries=\(([^)]*)\)", in_container, re.M)
    installed = listed.group(1).split() if listed else []
    if sorted(installed) != sorted(BINARIES):
        errors.append(
            f"build-in-container.sh installs [{','.join(installed)}] "
            f"but the project's binaries are [{','.join(BINARIES)}]"
        )
    if '"$src/scripts/build"' not in in_container:
        errors.append("build-in-container.sh must build with scripts/build")
    disabled = set(re.findall(r"-D(\w+)=OFF", in_container))
    needed = _needed_sources(read("CMakeLists.txt"), disabled)

    dockerfiles = sorted(p for p in docker.iterdir() if re.fullmatch(r"Dockerfile(\.\w+)?", p.name))
    if not dockerfiles:
        errors.append("no Dockerfile in deploy/docker")
    for path in dockerfiles:
        _check_dockerfile(path, root, named_contexts, needed, errors)
    errors.extend(check_cuda_version(read("deploy/docker/Dockerfile.cuda"), "deploy/docker/Dockerfile.cuda", torch_cuda))
    if "/src/scripts/setup" not in read("deploy/docker/Dockerfile.cpu"):
        errors.append("deploy/docker/Dockerfile.cpu: must install through scripts/setup")
    scripts = _check_scripts(root, errors)
    return errors, len(dockerfiles), len(scripts)
