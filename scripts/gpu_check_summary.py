#!/usr/bin/env python3
"""scripts/gpu-check's step table and its summary (summary.json), kept apart from the GPU work so
they are tested on a CPU (tests/tools/gpu_check_summary_test.py).

Contract:
- STEPS is the one definition of the steps' order, time bounds and log files. The bounds plus
  OVERHEAD_S fit BUDGET_S (9 minutes, build included): `plan` refuses a table that does not.
- The summary is rewritten atomically (a temporary file in the same folder, then rename) after
  every change, so a run cut short at any moment leaves a complete JSON file holding every step
  taken so far; a step in flight reads "running".
- The output folder holds at most MAX_OUT_FILES files (a GPU machine returns no more): the
  summary and one log per step. `record` checks it after each step and says so in the summary.

Usage (from scripts/gpu-check):
  gpu_check_summary.py plan [--steps a,b] [--shell]       the steps and bounds (checked)
  gpu_check_summary.py parts STEP                           a step's part bounds: 'name=s ...'
  gpu_check_summary.py init OUT --steps a,b [--meta k=v]...  a new summary, every step pending
  gpu_check_summary.py start OUT STEP                       mark STEP running
  gpu_check_summary.py record OUT STEP STATUS SECONDS [--reason R] [--result FILE]
                                                            [--junit FILE]
  gpu_check_summary.py finish OUT SECONDS                   totals, overall pass/fail
"""
import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass

BUDGET_S = 540  # 9 minutes of wall time on the GPU machine, build included
OVERHEAD_S = 15  # the preflight (PyTorch's import, the GPU's name) and the summary writes
MAX_OUT_FILES = 8  # what a GPU machine returns from its output folder
MAX_LOG_BYTES = 8 << 20  # a log is cut to its last 8 MiB (the machine returns <= 16 MiB a file)
SUMMARY = "summary.json"
STATUSES = ("pending", "running", "passed", "failed", "timeout", "skipped")


@dataclass(frozen=True)
class Step:
    name: str
    bound_s: int
    measures: str

    @property
    def log(self):
        return f"{self.name}.log"


# Priority order: a run cut short keeps the most important figures.
STEPS = (
    Step("build", 160, "configure, then build the CMake targets retort_gpu_check_<step> of the "
         "steps asked for, with every core"),
    Step("kd", 140, "the KD step (ViT-B/16 -> ViT-S/16, 224 px, batch 256, bf16), retort vs "
         "PyTorch eager vs torch.compile on the same GPU: samples/s, MFU, step ms"),
    Step("tests", 90, "the GPU tests (ctest -L gpu_check_tests): two workers on one GPU with a "
         "kill -9, NCCL collectives and the staged NCCL x UCX data plane, the bf16 KD step"),
    Step("staging", 20, "the staging pipeline (staging_bench): device reduce-scatter through "
         "pinned memory over UCX vs its slowest stage"),
    Step("jpeg", 75, "nvJPEG: its GPU tests (ctest -L gpu_check_jpeg), decode images/s vs CPU "
         "decoding and torchvision, and the KD step on JPEG input (data wait share)"),
    Step("teacher", 40, "the exported (AOTInductor) teacher vs LibTorch's (exported_teacher_bench); "
         "skipped while that benchmark is not built"),
)
STEP_NAMES = tuple(s.name for s in STEPS)
# Steps made of parts bound one by one, so one part running long (a cold torch.compile) leaves
# the others' figures: each step's parts, in seconds, within its bound less PART_SLACK_S.
PARTS = {"kd": {"retort": 30, "eager": 30, "compile": 70},
         "jpeg": {"tests": 20, "decode": 25, "kd_jpeg": 25}}
PART_SLACK_S = 5  # the JPEG folder, the results' combination


def step(name):
    for s in STEPS:
        if s.name == name:
            return s
    raise ValueError(f"unknown step {name!r} (steps: {', '.join(STEP_NAMES)})")


def check_plan(steps=STEPS, budget_s=BUDGET_S, overhead_s=OVERHEAD_S,
               max_files=MAX_OUT_FILES):
    """Raises ValueError unless the bounds fit the budget and the logs fit the file limit."""
    total = sum(s.bound_s for s in steps) + overhead_s
    if total > budget_s:
        raise ValueError(f"the step bounds and overhead add up to {total} s, over the "
                         f"{budget_s} s budget")
    for s in steps:
        parts = sum(PARTS.get(s.name, {}).values())
        if parts and parts + PART_SLACK_S > s.bound_s:
            raise ValueError(f"step {s.name}'s parts take up to {parts} s (+{PART_SLACK_S}), "
                             f"over its {s.bound_s} s bound")
    files = len(steps) + 1  # one log per step and the summary
    if files > max_files:
        raise ValueError(f"{files} output files, over the limit of {max_files}")
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
    summary = {"meta": dict(meta or {}), "budget_s": BUDGET_S, "order": ordered,
               "steps": {n: {"status": "pending", "bound_s": step(n).bound_s,
                             "measures": step(n).measures, "log": step(n).log}
                         for n in ordered},
               "finished": False}
    os.makedirs(out, exist_ok=True)
    save(out, summary)
    return summary


def start(out, name):
    summary = load(out)
    summary["steps"][name]["status"] = "running"
    save(out, summary)
    return summary


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
        f = {"decode": [_pick(r, ("impl", "decoder", "decode", "threads", "images_per_s", "error"))
                        for r in (result.get("decode") or {}).get("results", [])]}
        kd_jpeg = (result.get("kd") or {}).get("retort_jpeg_input")
        if isinstance(kd_jpeg, dict):
            f["kd_jpeg"] = _pick(kd_jpeg, _KD_KEYS + ("data_wait_fraction",))
            synthetic = ((summary or {}).get("steps", {}).get("kd", {}).get("figures", {})
                         .get("retort", {}).get("samples_per_s"))
            if synthetic and "samples_per_s" in kd_jpeg:
                f["jpeg_vs_synthetic"] = round(kd_jpeg["samples_per_s"] / synthetic, 3)
        return f
    if name == "build":
        return _pick(result, ("jobs", "targets", "cmake_seconds"))
    return {}


def tests_of(junit_path):
    """ctest's JUnit report as counts, failed names and the '[ measured ]' lines."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from junit_to_json import rows  # noqa: E402 (the one reader of ctest's report)
    tests = rows(junit_path)
    return {"counts": {k: sum(1 for t in tests if t["status"] == k)
                       for k in ("passed", "failed", "skipped")},
            "failed": [t["name"] for t in tests if t["status"] == "failed"],
            "skipped": {t["name"]: t["reason"] for t in tests if t["status"] == "skipped"},
            "measured": [m for t in tests for m in t.get("measured", [])],
            "seconds": {t["name"]: t["seconds"] for t in tests}}


def record(out, name, status, seconds, reason=None, result=None, junit=None):
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
    if result is not None:
        entry["result"] = result
        entry["figures"] = figures(name, result, summary)
    if junit is not None:
        entry["tests"] = tests_of(junit)
        if entry["tests"]["counts"]["failed"] and status == "passed":
            entry["status"] = "failed"
    problem = check_out_files(out)
    if problem:
        summary["out_files_error"] = problem
    save(out, summary)
    return summary


def finish(out, seconds):
    summary = load(out)
    statuses = [summary["steps"][n]["status"] for n in summary["order"]]
    summary.update(finished=True, seconds=round(float(seconds), 1),
                   within_budget=float(seconds) <= BUDGET_S,
                   passed=(all(s in ("passed", "skipped") for s in statuses)
                           and "out_files_error" not in summary))
    save(out, summary)
    return summary


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--steps", default=",".join(STEP_NAMES))
    p.add_argument("--shell", action="store_true", help="'name bound log' lines, nothing else")
    p = sub.add_parser("parts", help="a step's part bounds as 'name=seconds ...'")
    p.add_argument("step")
    p = sub.add_parser("init")
    p.add_argument("out")
    p.add_argument("--steps", required=True)
    p.add_argument("--meta", action="append", default=[], help="key=value")
    p = sub.add_parser("start")
    p.add_argument("out")
    p.add_argument("step")
    p = sub.add_parser("record")
    p.add_argument("out")
    p.add_argument("step")
    p.add_argument("status", choices=STATUSES)
    p.add_argument("seconds", type=float)
    p.add_argument("--reason")
    p.add_argument("--result", help="a file whose last JSON line is the step's result")
    p.add_argument("--junit", help="ctest's JUnit report of the step's tests")
    p = sub.add_parser("finish")
    p.add_argument("out")
    p.add_argument("seconds", type=float)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "plan":
            check_plan()
            names = [n for n in a.steps.split(",") if n]
            chosen = [step(n) for n in STEP_NAMES if n in names]
            for n in names:
                step(n)
            if a.shell:
                for s in chosen:
                    print(s.name, s.bound_s, s.log)
            else:
                for s in chosen:
                    print(f"{s.name:8} <= {s.bound_s:3d} s  {s.log:12} {s.measures}")
                total = sum(s.bound_s for s in chosen) + OVERHEAD_S
                print(f"{'total':8} <= {total:3d} s  (with {OVERHEAD_S} s of overhead; budget "
                      f"{BUDGET_S} s; {len(chosen) + 1} of at most {MAX_OUT_FILES} output files)")
        elif a.cmd == "parts":
            step(a.step)
            print(" ".join(f"{k}={v}" for k, v in PARTS.get(a.step, {}).items()))
        elif a.cmd == "init":
            meta = {k: int(v) if v.isdigit() else v
                    for k, v in (kv.split("=", 1) for kv in a.meta)}
            init(a.out, [n for n in a.steps.split(",") if n], meta)
        elif a.cmd == "start":
            start(a.out, a.step)
        elif a.cmd == "record":
            result = None
            if a.result:
                result = read_result(a.result)
                if result is None:
                    result = {"error": f"no JSON result in {os.path.basename(a.result)}"}
            summary = record(a.out, a.step, a.status, a.seconds, a.reason, result, a.junit)
            entry = summary["steps"][a.step]
            print(json.dumps({"step": a.step, "status": entry["status"],
                              "seconds": entry["seconds"],
                              "figures": entry.get("figures"),
                              "tests": (entry.get("tests") or {}).get("counts")}))
            if "out_files_error" in summary:
                print(summary["out_files_error"], file=sys.stderr)
                return 1
        elif a.cmd == "finish":
            s = finish(a.out, a.seconds)
            print(" ".join(f"{n}={s['steps'][n]['status']}({s['steps'][n].get('seconds', 0)} s)"
                           for n in s["order"]))
            return 0 if s["passed"] else 1
    except ValueError as e:
        print(f"gpu_check_summary: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
