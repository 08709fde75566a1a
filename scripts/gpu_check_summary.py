#!/usr/bin/env python3
"""scripts/gpu-check's step table and its summary (summary.json), kept apart from the GPU work so
they are tested on a CPU (tests/tools/gpu_check_summary_test.py).

Contract:
- STEPS is the one definition of the steps' order, time bounds and log files, and of which steps
  run by default (the others only when asked for by name: `--step teacher`). The default plan's
  bounds plus OVERHEAD_S leave at least MIN_SLACK_S of BUDGET_S (9 minutes, build included), and
  so does the build with any one opt-in step: `table` and `plan` refuse a table that does not.
- The summary is rewritten atomically (a temporary file in the same folder, then rename) after
  every change, so a run cut short at any moment leaves a complete JSON file holding every step
  taken so far; a step in flight reads "running", with the rows it has taken so far ("partial",
  `row`), which a step cut by its bound or failed keeps.
- On a machine with a GPU (meta gpus > 0, not a rehearsal) a GPU test that skips fails its step:
  there a skip means LibTorch's CUDA backend or nvJPEG did not load. The one exception is a test
  that needs more GPUs than are visible (NEEDS_MORE_GPUS): it is listed as "not exercised".
- The output folder holds at most MAX_OUT_FILES files (a GPU machine returns no more): the
  summary and one log per step. `record` checks it after each step and says so in the summary.

Usage (from scripts/gpu-check):
  gpu_check_summary.py table                                'name bound log default|opt-in' lines
  gpu_check_summary.py plan [--steps a,b]                   the steps, bounds and slack (checked)
  gpu_check_summary.py parts STEP                           a step's part bounds: 'name=s ...'
  gpu_check_summary.py init OUT --steps a,b [--meta k=v]...  a new summary, every step pending
  gpu_check_summary.py meta OUT k=v...                      add to the summary's meta
  gpu_check_summary.py start OUT STEP                       mark STEP running
  gpu_check_summary.py row OUT STEP JSON [--tag k=v]...      add a row STEP has just taken to its
                                                            "partial"; prints the row as kept
  gpu_check_summary.py record OUT STEP STATUS SECONDS [--reason R] [--result FILE]
                                                            [--junit FILE]... [--note TEXT]...
  gpu_check_summary.py finish OUT SECONDS                   totals, overall pass/fail
  gpu_check_summary.py abort OUT SECONDS REASON             the run stopped before its steps
                                                            ended: why, then finish
"""
import argparse
import json
import os
import re
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass

BUDGET_S = 540  # 9 minutes of wall time on the GPU machine, build included
OVERHEAD_S = 15  # the preflight (PyTorch's import, the GPU's name) and the summary writes
MIN_SLACK_S = 60  # what the plan leaves of the budget: the bounds are not measured on a GPU yet
MAX_OUT_FILES = 8  # what a GPU machine returns from its output folder
MAX_LOG_BYTES = 8 << 20  # a log is cut to its last 8 MiB (the machine returns <= 16 MiB a file)
SUMMARY = "summary.json"
STATUSES = ("pending", "running", "passed", "failed", "timeout", "skipped")
# A GPU test's skip message saying it needs more devices than the machine has (one rank per
# GPU): not a failure on a machine with fewer, but a figure "not exercised".
NEEDS_MORE_GPUS = re.compile(r"needs (two|three|four|\d+) (CUDA devices|GPUs)", re.I)
_COUNTS = {"two": 2, "three": 3, "four": 4}


@dataclass(frozen=True)
class Step:
    name: str
    bound_s: int
    measures: str
    default: bool = True  # in the plan unless --step names others; else only when named

    @property
    def log(self):
        return f"{self.name}.log"


# Priority order: a run cut short keeps the most important figures.
STEPS = (
    Step("build", 160, "configure (CUDA, NCCL, LibTorch and nvJPEG required), then build each "
         "step's CMake target retort_gpu_check_<step> on its own, in this order, with every "
         "core: a target that fails to build fails its step alone"),
    Step("kd", 125, "the KD step (ViT-B/16 -> ViT-S/16, 224 px, batch 256, bf16), retort vs "
         "PyTorch eager vs torch.compile on the same GPU (its caches warmed during the build): "
         "samples/s, MFU, step ms"),
    Step("tests", 90, "the GPU tests (ctest -L gpu_check_tests), the KD step's first (bf16 loss "
         "curve, fp32 against the CPU): two workers on one GPU with a kill -9, NCCL collectives "
         "and the staged NCCL x UCX data plane on the GPUs visible (multi-rank NCCL, one rank "
         "per GPU: not exercised on a one-GPU machine)"),
    Step("staging", 20, "the staging pipeline (staging_bench): device reduce-scatter through "
         "pinned memory over UCX vs its slowest stage"),
    Step("jpeg", 70, "nvJPEG: its GPU tests (ctest -L gpu_check_jpeg), a small JPEG folder made "
         "in parallel, decode images/s vs CPU decoding and torchvision, and the KD step on JPEG "
         "input (data wait share), each row saved as it is taken"),
    Step("teacher", 300, "opt-in (--step teacher): the exported (AOTInductor) teacher vs "
         "LibTorch's (exported_teacher_bench), its packages compiled for the GPU (minutes)",
         default=False),
)
STEP_NAMES = tuple(s.name for s in STEPS)
DEFAULT_STEPS = tuple(s.name for s in STEPS if s.default)
# Steps made of parts bound one by one, so one part running long (a cold torch.compile) leaves
# the others' figures: each step's parts, in seconds, within its bound less PART_SLACK_S.
PARTS = {"kd": {"retort": 25, "eager": 25, "compile": 70},
         "jpeg": {"tests": 20, "fixture": 8, "decode": 22, "kd_jpeg": 15}}
PART_SLACK_S = 5  # starting the parts, the results' combination


def step(name):
    for s in STEPS:
        if s.name == name:
            return s
    raise ValueError(f"unknown step {name!r} (steps: {', '.join(STEP_NAMES)})")


def default_plan():
    return tuple(s for s in STEPS if s.default)


def plan_total(steps, overhead_s=OVERHEAD_S):
    return sum(s.bound_s for s in steps) + overhead_s


def check_plan(steps=None, budget_s=BUDGET_S, overhead_s=OVERHEAD_S, max_files=MAX_OUT_FILES,
               min_slack_s=MIN_SLACK_S):
    """Raises ValueError unless the bounds of `steps` (default: the default plan) and the
    overhead leave min_slack_s of the budget, each step's parts fit its bound, and the logs fit
    the file limit. Returns the total."""
    steps = default_plan() if steps is None else tuple(steps)
    total = plan_total(steps, overhead_s)
    if total > budget_s:
        raise ValueError(f"the step bounds and overhead add up to {total} s, over the "
                         f"{budget_s} s budget")
    if budget_s - total < min_slack_s:
        raise ValueError(f"the step bounds and overhead add up to {total} s, leaving "
                         f"{budget_s - total} s of the {budget_s} s budget, under the "
                         f"{min_slack_s} s of slack the plan keeps")
    for s in steps:
        parts = sum(PARTS.get(s.name, {}).values())
        if parts and parts + PART_SLACK_S > s.bound_s:
            raise ValueError(f"step {s.name}'s parts take up to {parts} s (+{PART_SLACK_S}), "
                             f"over its {s.bound_s} s bound")
    files = len(steps) + 1  # one log per step and the summary
    if files > max_files:
        raise ValueError(f"{files} output files, over the limit of {max_files}")
    return total


def check_table(steps=STEPS, **limits):
    """check_plan for the default plan, and for the build with each opt-in step (`--step
    NAME`), and the file limit for every step at once; returns the default plan's total."""
    total = check_plan(tuple(s for s in steps if s.default), **limits)
    for s in steps:
        if not s.default:
            check_plan((steps[0], s), **limits)
    check_plan(steps, min_slack_s=-10**9, budget_s=10**9,
               max_files=limits.get("max_files", MAX_OUT_FILES))
    return total


def write_atomically(path, data):
    """Writes JSON `data` to `path` so a reader sees the old or the new file, never a part."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".summary.", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(out):
    with open(os.path.join(out, SUMMARY)) as f:
        return json.load(f)


def save(out, summary):
    write_atomically(os.path.join(out, SUMMARY), summary)


def init(out, names, meta=None):
    for n in names:
        step(n)
    ordered = [n for n in STEP_NAMES if n in names]
    total = plan_total([step(n) for n in ordered])
    summary = {"meta": dict(meta or {}), "budget_s": BUDGET_S, "plan_s": total,
               "slack_s": BUDGET_S - total, "order": ordered,
               "steps": {n: {"status": "pending", "bound_s": step(n).bound_s,
                             "measures": step(n).measures, "log": step(n).log}
                         for n in ordered},
               "finished": False}
    os.makedirs(out, exist_ok=True)
    save(out, summary)
    return summary


def add_meta(out, meta):
    summary = load(out)
    summary.setdefault("meta", {}).update(meta)
    save(out, summary)
    return summary


def start(out, name):
    summary = load(out)
    summary["steps"][name]["status"] = "running"
    summary["steps"][name].pop("partial", None)
    save(out, summary)
    return summary


def add_row(out, name, row, tags=None):
    """Adds a row (a JSON object) that step `name` has just taken to its "partial" list, so it
    is in the summary even if the step is then cut by its bound; returns the row as kept."""
    if not isinstance(row, dict):
        row = {"value": row}
    row = {**dict(tags or {}), **row}
    summary = load(out)
    summary["steps"][name].setdefault("partial", []).append(row)
    save(out, summary)
    return row


def out_files(out):
    return sorted(f for f in os.listdir(out)
                  if os.path.isfile(os.path.join(out, f)) and not f.startswith(".summary."))


def check_out_files(out, max_files=MAX_OUT_FILES, max_log_bytes=MAX_LOG_BYTES):
    """Cuts logs over max_log_bytes to their tail; returns an error line when the folder holds
    more than max_files files (the machine would return only some), else None."""
    files = out_files(out)
    for f in files:
        path = os.path.join(out, f)
        if f.endswith(".log") and os.path.getsize(path) > max_log_bytes:
            with open(path, "rb") as src:
                src.seek(-max_log_bytes, os.SEEK_END)
                tail = src.read()
            with open(path, "wb") as dst:
                dst.write(b"[cut to its last %d bytes]\n" % max_log_bytes + tail)
    if len(files) > max_files:
        return f"{len(files)} files in {out}, over the limit of {max_files}: {', '.join(files)}"
    return None


def _pick(d, keys):
    return {k: d[k] for k in keys if isinstance(d, dict) and k in d}


_KD_KEYS = ("samples_per_s", "mfu", "step_ms_median", "step_ms_p99", "peak_memory_gib", "error",
            "skipped")


def result_of_rows(name, rows):
    """A step's result object made from the rows it took before it was cut (its "partial"), in
    the shape of its full result, so figures() reads either."""
    if name == "jpeg":
        fixture = [r for r in rows if r.get("part") == "fixture"]
        kd = [r for r in rows if r.get("part") == "kd_jpeg"]
        return {"fixture": fixture[-1] if fixture else {},
                "decode": {"results": [r for r in rows if r.get("part") == "decode"]},
                "kd": kd[-1] if kd else {}}
    if name == "build":
        return {"targets": {r["step"]: _pick(r, ("status", "seconds"))
                            for r in rows if "step" in r}}
    return {}


def figures(name, result, summary=None):
    """The key figures of a step's result object (the benchmark's JSON), for a reader of the
    summary; the whole result is kept beside them."""
    if not isinstance(result, dict):
        return {}
    if name == "kd":
        f = {side: _pick(result.get(side), _KD_KEYS)
             for side in ("retort", "pytorch_eager", "pytorch_compile")}
        f.update(_pick(result, ("speedup_vs_eager", "speedup_vs_compile")))
        return f
    if name == "staging":
        sizes = result.get("sizes") or []
        ratios = [s["of_slowest_stage"] for s in sizes if "of_slowest_stage" in s]
        return {"of_slowest_stage_min": min(ratios)} if ratios else {}
    if name == "jpeg":
        f = {"decode": [_pick(r, ("row", "impl", "decoder", "decode", "threads", "images_per_s",
                                  "error"))
                        for r in (result.get("decode") or {}).get("results", [])]}
        if result.get("fixture"):
            f["fixture"] = _pick(result["fixture"], ("images", "processes", "seconds", "error"))
        kd_jpeg = (result.get("kd") or {}).get("retort_jpeg_input")
        if isinstance(kd_jpeg, dict):
            f["kd_jpeg"] = _pick(kd_jpeg, _KD_KEYS + ("data_wait_fraction",))
            synthetic = ((summary or {}).get("steps", {}).get("kd", {}).get("figures", {})
                         .get("retort", {}).get("samples_per_s"))
            if synthetic and "samples_per_s" in kd_jpeg:
                f["jpeg_vs_synthetic"] = round(kd_jpeg["samples_per_s"] / synthetic, 3)
        return f
    if name == "build":
        return _pick(result, ("jobs", "configure_s", "targets"))
    return {}


def tests_of(junit_paths):
    """ctest's JUnit reports (one per ctest run of the step) as counts, failed names, skip
    reasons and the '[ measured ]' lines."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from junit_to_json import rows  # noqa: E402 (the one reader of ctest's report)
    if isinstance(junit_paths, (str, os.PathLike)):
        junit_paths = [junit_paths]
    tests, unreadable = [], []
    for path in junit_paths:
        # A GoogleTest skip that ctest took for a pass (no SKIP_REGULAR_EXPRESSION, as with a
        # test not registered by gtest_discover_tests) still prints "[  SKIPPED ]": a skip.
        try:
            outputs = {c.get("name"): c.findtext("system-out") or ""
                       for c in ET.parse(path).getroot().iter("testcase")}
            found = rows(path)
        except (ET.ParseError, OSError):  # a ctest cut while writing it
            unreadable.append(os.path.basename(path))
            continue
        for t in found:
            out = outputs.get(t["name"], "")
            if t["status"] == "passed" and "[  SKIPPED ]" in out:
                m = re.search(r"Skipped\s*\n(.+)", out)
                t.update(status="skipped", reason=m.group(1).strip() if m else "[  SKIPPED ]")
            tests.append(t)
    return {"counts": {k: sum(1 for t in tests if t["status"] == k)
                       for k in ("passed", "failed", "skipped")},
            "failed": [t["name"] for t in tests if t["status"] == "failed"],
            "skipped": {t["name"]: t["reason"] for t in tests if t["status"] == "skipped"},
            "measured": [m for t in tests for m in t.get("measured", [])],
            "seconds": {t["name"]: t["seconds"] for t in tests},
            **({"unreadable_reports": unreadable} if unreadable else {})}


def gpus_of(summary):
    try:
        return int(summary.get("meta", {}).get("gpus") or 0)
    except (TypeError, ValueError):
        return 0


def on_a_gpu_machine(summary):
    """Whether this run had a GPU to test on: there, a GPU test's skip is a failure."""
    rehearsal = str(summary.get("meta", {}).get("rehearsal", 0))
    return gpus_of(summary) > 0 and rehearsal in ("0", "False", "false", "")


def needs_more_gpus(reason, gpus):
    """Whether a skip's reason says the test needs more GPUs than the `gpus` visible."""
    m = NEEDS_MORE_GPUS.search(reason or "")
    if not m:
        return False
    word = m.group(1).lower()
    return (int(word) if word.isdigit() else _COUNTS[word]) > gpus


def record(out, name, status, seconds, reason=None, result=None, junit=None, notes=None):
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}")
    summary = load(out)
    entry = summary["steps"].setdefault(name, {"bound_s": step(name).bound_s,
                                               "log": step(name).log})
    # The GPU beside each step's figures, so a figure copied out keeps the machine it came from.
    entry.update(status=status, seconds=round(float(seconds), 1),
                 gpu=summary.get("meta", {}).get("gpu"))
    if reason:
        entry["reason"] = reason
    if notes:
        entry["notes"] = list(notes)
    # A step's rows (its "partial") make its result when it wrote none; a step that passed
    # keeps them in its result only, one cut short or failed keeps them as they are.
    partial = entry.get("partial")
    if result is None and partial:
        result = result_of_rows(name, partial) or None
        if status != "passed":
            entry["figures"] = figures(name, result, summary) if result else {}
            result = None
    if result is not None:
        entry["result"] = result
        entry["figures"] = figures(name, result, summary)
        if status == "passed":
            entry.pop("partial", None)
    if junit:
        t = entry["tests"] = tests_of(junit)
        problems = []
        if t["counts"]["failed"]:
            problems.append(f"{t['counts']['failed']} test(s) failed: {', '.join(t['failed'])}")
        if on_a_gpu_machine(summary):
            t["not_exercised"] = {n: r for n, r in t["skipped"].items()
                                  if needs_more_gpus(r, gpus_of(summary))}
            skipped = [n for n in t["skipped"] if n not in t["not_exercised"]]
            if skipped:
                problems.append(f"{len(skipped)} GPU test(s) skipped on a machine with a GPU "
                                f"(a failure there): {', '.join(skipped)}")
        if problems and status == "passed":
            entry["status"] = "failed"
            entry["reason"] = "; ".join(problems)
    problem = check_out_files(out)
    if problem:
        summary["out_files_error"] = problem
    save(out, summary)
    return summary


def not_exercised(summary):
    """What this run could not exercise: tests that need more GPUs than were visible, and
    multi-rank NCCL (one rank per GPU) on a machine with fewer than two."""
    found = {}
    for n in summary.get("order", []):
        found.update((summary["steps"][n].get("tests") or {}).get("not_exercised") or {})
    gpus = gpus_of(summary)
    if gpus < 2:
        found["multi-rank NCCL"] = (f"not exercised: {gpus} GPU(s) visible, and NCCL needs one "
                                    "GPU per rank")
    return found


def finish(out, seconds):
    summary = load(out)
    statuses = [summary["steps"][n]["status"] for n in summary["order"]]
    summary.update(finished=True, seconds=round(float(seconds), 1),
                   within_budget=float(seconds) <= BUDGET_S,
                   not_exercised=not_exercised(summary),
                   passed=(all(s in ("passed", "skipped") for s in statuses)
                           and "out_files_error" not in summary and "error" not in summary))
    save(out, summary)
    return summary


def abort(out, seconds, reason):
    """The run stopped before its steps ended (a missing tool, no GPU): why, in the summary."""
    summary = load(out)
    summary["error"] = reason
    save(out, summary)
    return finish(out, seconds)


def read_result(path):
    """A result file's JSON object: the last line that parses (benchmarks may log before it)."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def _key_values(pairs):
    return {k: int(v) if v.isdigit() else v for k, v in (kv.split("=", 1) for kv in pairs)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("table", help="'name bound log default|opt-in' lines, every step")
    p = sub.add_parser("plan")
    p.add_argument("--steps", default=",".join(DEFAULT_STEPS))
    p = sub.add_parser("parts", help="a step's part bounds as 'name=seconds ...'")
    p.add_argument("step")
    p = sub.add_parser("init")
    p.add_argument("out")
    p.add_argument("--steps", required=True)
    p.add_argument("--meta", action="append", default=[], help="key=value")
    p = sub.add_parser("meta")
    p.add_argument("out")
    p.add_argument("pairs", nargs="+", help="key=value")
    p = sub.add_parser("start")
    p.add_argument("out")
    p.add_argument("step")
    p = sub.add_parser("row")
    p.add_argument("out")
    p.add_argument("step")
    p.add_argument("json", help="the row: one JSON object")
    p.add_argument("--tag", action="append", default=[], help="key=value added to the row")
    p = sub.add_parser("record")
    p.add_argument("out")
    p.add_argument("step")
    p.add_argument("status", choices=STATUSES)
    p.add_argument("seconds", type=float)
    p.add_argument("--reason")
    p.add_argument("--result", help="a file whose last JSON line is the step's result")
    p.add_argument("--junit", action="append", default=[],
                   help="ctest's JUnit report of the step's tests (one per ctest run)")
    p.add_argument("--note", action="append", default=[], help="a line kept with the step")
    p = sub.add_parser("finish")
    p.add_argument("out")
    p.add_argument("seconds", type=float)
    p = sub.add_parser("abort")
    p.add_argument("out")
    p.add_argument("seconds", type=float)
    p.add_argument("reason")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "table":
            check_table()
            for s in STEPS:
                print(s.name, s.bound_s, s.log, "default" if s.default else "opt-in")
        elif a.cmd == "plan":
            check_table()
            names = [n for n in a.steps.split(",") if n]
            for n in names:
                step(n)
            chosen = [step(n) for n in STEP_NAMES if n in names]
            for s in chosen:
                print(f"{s.name:8} <= {s.bound_s:3d} s  {s.log:12} {s.measures}")
            total = plan_total(chosen)
            print(f"{'total':8} <= {total:3d} s  (with {OVERHEAD_S} s of overhead; budget "
                  f"{BUDGET_S} s; slack {BUDGET_S - total} s; {len(chosen) + 1} of at most "
                  f"{MAX_OUT_FILES} output files)")
            opt_in = [s.name for s in STEPS if not s.default and s.name not in names]
            if opt_in:
                print(f"not in this plan (opt-in, --step NAME): {', '.join(opt_in)}")
            if total > BUDGET_S:
                raise ValueError(f"these steps' bounds add up to {total} s, over the "
                                 f"{BUDGET_S} s budget: ask for fewer at a time")
        elif a.cmd == "parts":
            step(a.step)
            print(" ".join(f"{k}={v}" for k, v in PARTS.get(a.step, {}).items()))
        elif a.cmd == "init":
            init(a.out, [n for n in a.steps.split(",") if n], _key_values(a.meta))
        elif a.cmd == "meta":
            add_meta(a.out, _key_values(a.pairs))
        elif a.cmd == "start":
            start(a.out, a.step)
        elif a.cmd == "row":
            print(json.dumps(add_row(a.out, a.step, json.loads(a.json), _key_values(a.tag))))
        elif a.cmd == "record":
            result = None
            if a.result:
                result = read_result(a.result)
                if result is None:
                    result = {"error": f"no JSON result in {os.path.basename(a.result)}"}
            summary = record(a.out, a.step, a.status, a.seconds, a.reason, result,
                             [j for j in a.junit if os.path.exists(j)], a.note)
            entry = summary["steps"][a.step]
            print(json.dumps({"step": a.step, "status": entry["status"],
                              "seconds": entry["seconds"],
                              "reason": entry.get("reason"),
                              "figures": entry.get("figures"),
                              "tests": (entry.get("tests") or {}).get("counts")}))
            if "out_files_error" in summary:
                print(summary["out_files_error"], file=sys.stderr)
                return 1
        elif a.cmd in ("finish", "abort"):
            s = finish(a.out, a.seconds) if a.cmd == "finish" else abort(a.out, a.seconds,
                                                                         a.reason)
            print(" ".join(f"{n}={s['steps'][n]['status']}({s['steps'][n].get('seconds', 0)} s)"
                           for n in s["order"]))
            return 0 if s["passed"] else 1
    except ValueError as e:
        print(f"gpu_check_summary: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
