"""Failure recovery, side by side on this machine: retort vs torchrun elastic on the same KD job.

Each round runs, for each implementation, 2 workers (two "nodes" on 127.0.0.1), waits until
step --kill-after-step is recorded, kill -9s the training process of the worker that does not
write the metrics (retort: the rank-1 worker; torchrun: node B's training process, not its
agent), starts a replacement (retort: a new retort-worker on node nB; torchrun: node B's agent
restarts its worker itself, max_restarts 3), and lets the job finish.

From the per-step metrics lines (step, time_unix_ms) it reports:
  recovery_seconds      kill -> first step completed after the kill whose number exceeds every
                        step completed before the failure was handled (the next NEW step)
  first_step_seconds    kill -> first step of any number completed by the recovered group
  resumed_from_step     the step the recovered group continued from (its first step - 1)
  steps_lost            last step completed before recovery - resumed_from_step (redone steps)
  full_world_seconds    kill -> first new step completed with 2 workers again
"Before recovery" means: retort lines of the generation current at the kill; torchrun lines
written by training processes that started before the kill.

Prints one JSON line per implementation per round, then a comparison line; lines starting with
'#' are context (survivor/agent logs around the kill, times relative to the kill).
"""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import sys
import tempfile

from procs import Children, now_ms, read_jsonl, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable
WORKERS = 2


def analyse(rows, kill_ms, is_new, total_steps):
    rows = sorted(rows, key=lambda r: r["time_unix_ms"])  # stable: file order within a ms
    old = [r for r in rows if not is_new(r)]
    new = [r for r in rows if is_new(r)]
    before = [r["step"] for r in rows if r["time_unix_ms"] <= kill_ms]
    result = {"killed_after_step": max(before) if before else 0,
              "last_step_before_recovery": max((r["step"] for r in old), default=0)}
    last_old = result["last_step_before_recovery"]
    steps = [r["step"] for r in rows]
    result.update(final_step=max(steps, default=0),
                  completed=max(steps, default=0) == total_steps,
                  steps_completed_twice=len(steps) - len(set(steps)),
                  steps_never_completed=len(set(range(1, total_steps + 1)) - set(steps)))
    if not new:
        result.update(recovered=False, recovery_seconds=None, steps_lost=None)
        return result
    first = new[0]
    first_new_step = next((r for r in new if r["step"] > last_old), None)
    full = next((r for r in new if r["world_size"] == WORKERS and r["step"] > last_old), None)
    seconds = lambda r: round((r["time_unix_ms"] - kill_ms) / 1000.0, 3) if r else None  # noqa
    result.update(recovered=True,
                  recovery_seconds=seconds(first_new_step),
                  first_step_seconds=seconds(first),
                  resumed_from_step=first["step"] - 1,
                  steps_lost=max(0, last_old - (first["step"] - 1)),
                  world_size_after=first["world_size"],
                  full_world_seconds=seconds(full))
    return result


def print_excerpt(label, child, kill_ms, until_ms, limit=40):
    lines = [(t, s) for t, s in child.log_lines() if kill_ms - 1000 <= t <= until_ms]
    for t, text in lines[:limit]:
        print("# [%s] %+8.3f s  %s" % (label, (t - kill_ms) / 1000.0, text[:220]))
    if len(lines) > limit:
        print("# [%s] ... %d more lines" % (label, len(lines) - limit))


def end_of_interest(result, kill_ms, timeout_s):
    latest = [result.get(k) for k in ("full_world_seconds", "recovery_seconds")]
    latest = [s for s in latest if s is not None]
    return kill_ms + int(1000 * (max(latest) + 0.5)) if latest else kill_ms + int(1000 * timeout_s)


def first_after(child, kill_ms, pattern):
    """(seconds after the kill, match) of the first log line after the kill matching pattern."""
    for t, text in child.log_lines():
        m = re.search(pattern, text) if t >= kill_ms else None
        if m:
            return round((t - kill_ms) / 1000.0, 3), m
    return None, None


def retort_timeline(coord, survivor, replacement, kill_ms):
    """Where the time between the kill and the first new step went, from the processes' logs
    (times are when each line was received, in seconds after the kill)."""
    timeline = {
        "replacement_joined": first_after(replacement, kill_ms, r"\] joined ")[0],
        "failure_noticed_by_coordinator":
            first_after(coord, kill_ms, r"member_(replaced|evicted)")[0],
        "new_generation_formed": first_after(coord, kill_ms, r"generation \d+ formed")[0],
        "survivor_left_old_generation": first_after(survivor, kill_ms, r"interrupted|stopping")[0],
    }
    ready, m = first_after(survivor, kill_ms, r"generation \d+: rank .*ready in (\d+) ms")
    timeline["survivor_ready_in_new_generation"] = ready
    timeline["survivor_bootstrap_ms"] = int(m.group(1)) if m else None
    timeline["replacement_ready"] = first_after(replacement, kill_ms,
                                                r"generation \d+: rank .*ready in")[0]
    timeline["optimizer_moments_reset"] = first_after(
        survivor, kill_ms, r"moments could not be gathered")[0] is not None
    return timeline


def retort_round(args, work, round_no, children):
    tools = os.path.join(args.build, "tools")
    out = os.path.join(work, "out")
    job = os.path.join(work, "job.yaml")
    with open(job, "w") as f:
        f.write("name: recovery-bench\n"
                "teacher: {preset: fm-teacher-p7}\n"
                "student: {preset: fm-student-p7}\n"
                "dataset: {kind: fashion-mnist}\n"
                "global_batch: 64\n"
                "steps: %d\n"
                "optimizer: {lr: 0.001, weight_decay: 0.05, clip_grad_norm: 1.0}\n"
                "distillation: {temperature: 4.0, alpha: 0.5}\n"
                "threads_per_worker: 1\n"
                "evaluate: false\n"
                "output_dir: %s\n" % (args.steps, out))
    port_file = os.path.join(work, "port")
    coord = children.start("coordinator", [
        os.path.join(tools, "retort-coordinator"), "--listen=127.0.0.1:0",
        "--port-file=" + port_file, "--state-dir=" + os.path.join(work, "state"),
        "--job=" + job] + args.coordinator_flag, os.path.join(work, "coordinator.log"))
    port = wait_until(lambda: open(port_file).read().strip() if os.path.exists(port_file) else "",
                      30)
    if not port:
        raise RuntimeError("retort-coordinator wrote no port within 30 s; see %s" % coord.log_path)
    address = "127.0.0.1:" + port

    def worker(node, name):
        return children.start(name, [os.path.join(tools, "retort-worker"),
                                     "--coordinator=" + address, "--node=" + node] +
                              args.worker_flag, os.path.join(work, name + ".log"))

    workers = {"nA": worker("nA", "worker-nA"), "nB": worker("nB", "worker-nB")}
    metrics = os.path.join(out, "metrics.jsonl")

    def reached(step):
        rows = read_jsonl(metrics)
        return rows if rows and rows[-1]["step"] >= step else None

    # Ranks are read at the first step so that the kill itself is not delayed by the query.
    if not wait_until(lambda: reached(1), 180):
        raise RuntimeError("retort: no step 1 within 180 s; see %s" % work)
    status = json.loads(children_output([os.path.join(tools, "retortctl"),
                                         "--coordinator=" + address, "--json", "status"]))
    rank_of = {m["node"]: m["rank"] for m in status["members"]}
    victim_node = next(n for n, r in rank_of.items() if r == 1)
    survivor_node = next(n for n, r in rank_of.items() if r == 0)
    rows = wait_until(lambda: reached(args.kill_after_step), 180)
    if not rows:
        raise RuntimeError("retort: step %d not reached within 180 s" % args.kill_after_step)
    kill_generation = rows[-1]["generation"]
    if kill_generation != status["generation"]:
        raise RuntimeError("retort: generation changed between status and kill")
    victim = workers[victim_node]
    kill_ms = now_ms()
    os.kill(victim.pid, 9)
    replacement = worker(args.replacement_node, "worker-replacement")
    survivor = workers[survivor_node]
    exits = {"coordinator": coord.wait(args.timeout), "survivor": survivor.wait(5),
             "replacement": replacement.wait(5), "killed": victim.wait(5)}
    if exits["coordinator"] is None:
        children_output([os.path.join(tools, "retortctl"), "--coordinator=" + address, "stop",
                         "--reason=benchmark timeout"], check=False)
        exits = {k: c.wait(20) for k, c in (("coordinator", coord), ("survivor", survivor),
                                            ("replacement", replacement), ("killed", victim))}
    result = analyse(read_jsonl(metrics), kill_ms,
                     lambda r: r["generation"] > kill_generation, args.steps)
    result = dict({"impl": "retort", "round": round_no, "kill_unix_ms": kill_ms,
                   "killed": "rank 1 (node %s)" % victim_node,
                   "generation_at_kill": kill_generation,
                   "generations_after": sorted({r["generation"] for r in read_jsonl(metrics)
                                                if r["generation"] > kill_generation})},
                  **result, timeline_s=retort_timeline(coord, survivor, replacement, kill_ms),
                  exit_codes=exits)
    until = end_of_interest(result, kill_ms, args.timeout)
    print_excerpt("retort survivor %s" % survivor_node, survivor, kill_ms, until)
    print_excerpt("retort coordinator", coord, kill_ms, until)
    print_excerpt("retort replacement %s" % args.replacement_node, replacement, kill_ms, until)
    return result


def children_output(argv, check=True):
    import subprocess
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (argv[0], done.returncode, done.stderr))
    return done.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_round(args, work, round_no, children):
    metrics = os.path.join(work, "metrics.jsonl")
    port = free_port()
    agents = {}
    for node in ("A", "B"):
        env = dict(os.environ, BENCH_PID_FILE=os.path.join(work, "pid-" + node),
                   LOGLEVEL="INFO", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        agents[node] = children.start("agent-" + node, [
            PYTHON, "-m", "torch.distributed.run", "--nnodes=1:%d" % WORKERS,
            "--nproc_per_node=1", "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:%d" % port,
            "--rdzv_id=bench-%d" % round_no, "--max_restarts=3",
            os.path.join(HERE, "elastic_reference.py"), "--steps", str(args.steps),
            "--global-batch", "64", "--checkpoint-every", str(args.checkpoint_every),
            "--checkpoint", os.path.join(work, "checkpoint.pt"), "--metrics", metrics],
            os.path.join(work, "agent-%s.log" % node), env)
        if node == "A":
            wait_until(lambda: False, 0.5)  # let node A host the c10d store
    rows = wait_until(lambda: [r for r in read_jsonl(metrics)
                               if r["step"] >= args.kill_after_step], 240)
    if not rows:
        raise RuntimeError("torchrun: step %d not reached within 240 s; see %s" %
                           (args.kill_after_step, work))
    victim_pid = int(open(os.path.join(work, "pid-B")).read())
    with open("/proc/%d/stat" % victim_pid) as f:
        parent = int(f.read().rsplit(")", 1)[1].split()[1])
    if parent != agents["B"].pid:
        raise RuntimeError("torchrun: pid %d is not a child of node B's agent" % victim_pid)
    kill_ms = now_ms()
    os.kill(victim_pid, 9)
    exits = {"agent_A": agents["A"].wait(args.timeout), "agent_B": agents["B"].wait(10)}
    if None in exits.values():
        for agent in agents.values():
            agent.kill_group()
    # Lines written by training processes started after the kill belong to the restarted group.
    starts = {}
    for node, agent in agents.items():
        for t, text in agent.log_lines():
            if text.startswith('{"event": "start"'):
                start = json.loads(text)
                starts.setdefault(start["restart"], []).append(start["time_unix_ms"])
    new_group_start = min((t for ts in starts.values() for t in ts if t > kill_ms), default=None)
    result = analyse(read_jsonl(metrics), kill_ms,
                     lambda r: new_group_start is not None and r["time_unix_ms"] >= new_group_start,
                     args.steps)
    result = dict({"impl": "torchrun_elastic", "round": round_no, "kill_unix_ms": kill_ms,
                   "killed": "node B training process (pid %d)" % victim_pid,
                   "checkpoint_every": args.checkpoint_every},
                  **result, timeline_s={
                      "survivor_process_error": first_after(agents["A"], kill_ms, r"Error")[0],
                      "agent_B_saw_failure": first_after(agents["B"], kill_ms, r"failed \(exit")[0],
                      "agent_A_restarting": first_after(agents["A"], kill_ms,
                                                        r"will restart|Stopping worker")[0],
                      "rendezvous_complete": first_after(agents["B"], kill_ms,
                                                         r"Rendezvous complete")[0],
                      "training_processes_initialized": round(
                          (new_group_start - kill_ms) / 1000.0, 3) if new_group_start else None},
                  exit_codes=exits)
    until = end_of_interest(result, kill_ms, args.timeout)
    for node, agent in agents.items():
        print_excerpt("torchrun agent %s" % node, agent, kill_ms, until, limit=30)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="retort build directory")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--kill-after-step", type=int, default=8)
    ap.add_argument("--checkpoint-every", type=int, default=5, help="torchrun reference")
    ap.add_argument("--timeout", type=float, default=150, help="seconds per side after the kill")
    ap.add_argument("--replacement-node", default="nB", help="retort replacement's --node")
    ap.add_argument("--only", choices=["retort", "torchrun_elastic"], help="run one side only")
    ap.add_argument("--coordinator-flag", action="append", default=[])
    ap.add_argument("--worker-flag", action="append", default=[])
    ap.add_argument("--keep", action="store_true", help="keep logs and outputs")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="retort_recovery_bench_")
    children = Children()
    results = {"retort": [], "torchrun_elastic": []}
    try:
        for round_no in range(1, args.rounds + 1):
            for impl, run in (("retort", retort_round), ("torchrun_elastic", torchrun_round)):
                if args.only and impl != args.only:
                    continue
                work = os.path.join(root, "round%d" % round_no, impl)
                os.makedirs(work)
                try:
                    result = run(args, work, round_no, children)
                except (RuntimeError, OSError, ValueError, KeyError, StopIteration) as e:
                    result = {"impl": impl, "round": round_no, "error": str(e)}
                children.cleanup()
                print(json.dumps(result), flush=True)
                results[impl].append(result)
    finally:
        children.cleanup()
        if args.keep:
            print("# logs and outputs kept in %s" % root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(comparison(results)), flush=True)


def comparison(results):
    def field(impl, key):
        return [r.get(key) for r in results[impl]]

    ours, ref = field("retort", "recovery_seconds"), field("torchrun_elastic", "recovery_seconds")
    pairs = [(a, b) for a, b in zip(ours, ref) if a is not None and b is not None]
    lost = field("retort", "steps_lost")
    moments_reset = [(r.get("timeline_s") or {}).get("optimizer_moments_reset")
                     for r in results["retort"]]
    speedups = [b / a for a, b in pairs if a > 0]
    return {"comparison": "failure_recovery_2_workers_kill_9",
            "retort_recovery_seconds": ours, "torchrun_recovery_seconds": ref,
            "retort_steps_lost": lost,
            "torchrun_steps_lost": field("torchrun_elastic", "steps_lost"),
            "retort_full_world_seconds": field("retort", "full_world_seconds"),
            "torchrun_full_world_seconds": field("torchrun_elastic", "full_world_seconds"),
            "retort_optimizer_moments_reset": moments_reset,
            "median_speedup": round(statistics.median(speedups), 2) if speedups else None,
            "targets": {"recovery_seconds_max": 3, "steps_lost": 0},
            "retort_meets_targets": bool(ours) and all(
                s is not None and s <= 3 for s in ours) and all(n == 0 for n in lost)}

if __name__ == "__main__":
    sys.exit(main())
