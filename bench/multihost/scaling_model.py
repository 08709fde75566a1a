#!/usr/bin/env python3
"""Alpha-beta (latency-bandwidth) model of retort's ZeRO-1 data plane, calibrated on test hosts.

Schedules modelled (collectives/README.md):
  flat ring reduce-scatter / all-gather, n ranks, S bytes:   (n-1) * (a + S/n * b_link)
    (node-major ring: each host link carries one flow, the bottleneck is the inter-host link)
  hierarchical, H hosts x L ranks: intra RS over L, then inter RS among equal local indices:
    (L-1) * (a_i + S/L * b_i) + (H-1) * (a_e + S/H * b_e)
    (the L inter-host flows of a host share its link: L * S/(L*H) bytes per step)

Calibration, from shaped_links_bench JSON lines (reduce_scatter, several sizes, several link
settings -- rate, one-way latency, loss -- both layouts, one run):
  a_e, b_e per link setting: least squares of the flat ring's times at that setting; b_e is
            the cost per byte through a host's link. Where the run has the interleaved flat
            ring (ranks dealt to hosts in turn: L flows share each link, as in the
            hierarchical inter-host level: (n-1) * (a + L * S/n * b_link)), a_e and b_e for the
            hierarchical prediction come from it instead: a link shared by L TCP flows is not
            as efficient as one carrying a single flow, and that is measured, not assumed;
  a_i, b_i: least squares of the hierarchical times at the *unshaped* setting (no rate limit,
            no latency, no loss), after subtracting its inter-host part (a_e, b_e of the
            unshaped flat ring).
Validation: the hierarchical times at every *shaped* setting are predicted from those (never
fitted on them) and compared with the measured ones.

Projection (--project): ViT-B/16 -> ViT-S/16 distillation on G GPUs, 8 per node, batch 256
per GPU. Every figure that is not a namespace measurement is a stated assumption (flag
defaults): the inter-node bandwidth per node (100-400 Gb/s), the inter-node latency, the NVLink
bandwidth inside a node. The GPU compute time of one KD step is not measured by retort here (no
GPU on this machine); the projection is made at step times derived from the pair's FLOPs
(62.96 GFLOP per sample: teacher forward + student forward and backward) at stated
model-FLOPs utilisations of an H100 (989.4 TFLOP/s dense bf16): 28.3%, what torch.compile
reached on one H100 with PyTorch 2.11 in the KD issue's reference measurement (4443
samples/s), and 40%, the goal; --compute-ms adds a measured step time (scripts/gpu-check's
kd_step_bench) when there is one. For each: the scaling efficiency with nothing overlapped,
with the gradient reduce-scatter overlapped with backward (bucketed, as the trainer does), and
with that plus bf16 gradients and parameters on the wire (half the bytes); and the smallest
step time that reaches 90% with nothing overlapped.

Usage: scaling_model.py MEASUREMENTS.jsonl [--project] [--json]
"""
import argparse
import json
import sys

import numpy as np


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if "op" in row and row["op"] == "reduce_scatter":
                rows.append(row)
    if not rows:
        sys.exit(f"scaling_model: no reduce_scatter lines in {path}")
    return rows


def fit(xs, ys):
    """Least squares y = a * x0 + b * x1 with a, b >= 0; xs: list of (x0, x1)."""
    A = np.array(xs, dtype=float)
    y = np.array(ys, dtype=float)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    if a < 0:  # latency not identifiable from these sizes: bandwidth only
        a, b = 0.0, float(np.dot(A[:, 1], y) / np.dot(A[:, 1], A[:, 1]))
    return float(a), float(b)


def flat_terms(n, s):
    return (n - 1, (n - 1) * s / n)


def setting(row):
    """A row's link setting: (rate Mbit/s, one-way latency us, loss); older files have rate only."""
    return (row["link_mbit"], row.get("link_latency_us", 0), row.get("link_loss", 0.0))


UNSHAPED = (0, 0, 0.0)


def describe(key):
    rate, latency, loss = key
    text = f"{rate} Mbit/s" if rate else "no rate limit"
    if latency:
        text += f", {latency} us"
    if loss:
        text += f", loss {loss:g}"
    return text


def calibrate(rows):
    impls = {r["impl"] for r in rows}
    for need in ("retort-ucx", "retort-hierarchical"):
        if need not in impls:
            sys.exit(f"scaling_model: no {need} lines (run shaped_links_bench with both backends)")
    H = rows[0]["hosts"]
    L = rows[0]["ranks_per_host"]
    n = H * L
    settings = sorted({setting(r) for r in rows})
    if UNSHAPED not in settings:
        sys.exit("scaling_model: the unshaped setting (rate 0, latency 0, no loss) calibrates the "
                 "intra-host terms; run it")
    link, shared = {}, {}
    for key in settings:
        flat = [r for r in rows if r["impl"] == "retort-ucx" and setting(r) == key]
        if not flat:
            sys.exit(f"scaling_model: no flat-ring lines at {describe(key)}")
        xs = [flat_terms(n, r["bytes"]) for r in flat]
        ys = [r["time_us"] * 1e-6 for r in flat]
        link[key] = fit(xs, ys)
        inter = [r for r in rows if r["impl"] == "retort-ucx-interleaved" and setting(r) == key]
        if inter:
            xs = [(n - 1, (n - 1) * r["bytes"] / n * L) for r in inter]
            ys = [r["time_us"] * 1e-6 for r in inter]
            shared[key] = fit(xs, ys)
    a_e0, b_e0 = link[UNSHAPED]
    hier0 = [r for r in rows if r["impl"] == "retort-hierarchical" and setting(r) == UNSHAPED]
    xs, ys = [], []
    for r in hier0:
        s = r["bytes"]
        inter = (H - 1) * (a_e0 + s / H * b_e0)
        xs.append((L - 1, (L - 1) * s / L))
        ys.append(max(0.0, r["time_us"] * 1e-6 - inter))
    a_i, b_i = fit(xs, ys)
    return {"hosts": H, "ranks_per_host": L, "link": link, "shared": shared, "intra": (a_i, b_i)}


def predict_hier(model, key, s, shared=True):
    """shared: the link terms measured with L flows per link (when the run has them)."""
    H, L = model["hosts"], model["ranks_per_host"]
    a_i, b_i = model["intra"]
    a_e, b_e = model["shared"][key] if shared and key in model["shared"] else model["link"][key]
    return (L - 1) * (a_i + s / L * b_i) + (H - 1) * (a_e + s / H * b_e)


def predict_flat(model, key, s):
    n = model["hosts"] * model["ranks_per_host"]
    a_e, b_e = model["link"][key]
    return (n - 1) * (a_e + s / n * b_e)


def vit_params(dim, depth, image=224, patch=16, channels=3, classes=1000, mlp_ratio=4):
    tokens = (image // patch) ** 2 + 1
    embed = patch * patch * channels * dim + dim + dim + tokens * dim
    block = 2 * 2 * dim + (dim * 3 * dim + 3 * dim) + (dim * dim + dim)
    block += dim * mlp_ratio * dim + mlp_ratio * dim + mlp_ratio * dim * dim + dim
    return embed + depth * block + 2 * dim + dim * classes + classes


# The KD pair's cost and the GPU the projection is for (see the docstring for the sources).
KD_FLOP_PER_SAMPLE = 62.96e9
H100_BF16_DENSE_FLOPS = 989.4e12
BATCH_PER_GPU = 256
# (label, model-FLOPs utilisation) of the step-time scenarios.
MFU_SCENARIOS = (("torch.compile reference, 28.3% MFU", 0.283), ("goal, 40% MFU", 0.40))


def step_time_scenarios(args):
    """(label, compute ms per step) for every step time the projection is made at."""
    scenarios = [(label, BATCH_PER_GPU * KD_FLOP_PER_SAMPLE / (H100_BF16_DENSE_FLOPS * mfu) * 1e3)
                 for label, mfu in MFU_SCENARIOS]
    if args.compute_ms is not None:
        scenarios.append(("measured (--compute-ms)", args.compute_ms))
    return scenarios


def project(args):
    params = vit_params(384, 12)  # ViT-S/16, the student: its fp32 gradients are reduce-scattered
    s = params * 4
    rows = []
    for gpus in (8, 64, 256):
        L = min(8, gpus)
        H = gpus // L
        # One node has no inter-node link: one row, the link named "any".
        for gbps in ((100, 200, 400) if H > 1 else ("any",)):
            b_e = 8 / (gbps * 1e9) if H > 1 else 0.0  # seconds per byte through one node's link
            b_i = 1 / (args.nvlink_GBps * 1e9)
            a_i, a_e = args.intra_latency_us * 1e-6, args.inter_latency_us * 1e-6

            def reduce_scatter(nbytes):
                return (L - 1) * (a_i + nbytes / L * b_i) + (H - 1) * (a_e + nbytes / H * b_e)

            rs = reduce_scatter(s)
            comm = 2 * rs  # reduce-scatter of gradients + all-gather of the updated parameters
            ag_bf16 = reduce_scatter(s / 2)  # the all-gather of bf16 parameters
            for label, compute_ms in step_time_scenarios(args):
                # Exposed communication: all of it; only the all-gather when the reduce-scatter
                # overlaps backward completely (gradient buckets; the best case); and that with
                # bf16 on the wire.
                rows.append({"gpus": gpus, "nodes": H, "link_Gbps": gbps, "grad_MB": s / 1e6,
                             "rs_ms": rs * 1e3, "comm_ms": comm * 1e3,
                             "step_time": label, "compute_ms": compute_ms,
                             "efficiency_no_overlap": compute_ms / (compute_ms + comm * 1e3),
                             "efficiency_rs_overlapped": compute_ms / (compute_ms + rs * 1e3),
                             "efficiency_rs_overlapped_bf16":
                                 compute_ms / (compute_ms + ag_bf16 * 1e3),
                             "compute_ms_for_90pct_no_overlap": 0.9 / 0.1 * comm * 1e3})
    return params, rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("measurements", help="shaped_links_bench JSON lines")
    p.add_argument("--project", action="store_true", help="also project to 8/64/256 GPUs")
    p.add_argument("--json", action="store_true", help="JSON lines only, no markdown")
    p.add_argument("--compute-ms", type=float, default=None,
                   help="a measured GPU time of one KD step at batch 256 (kd_step_bench), "
                        "projected beside the FLOP-derived step times")
    p.add_argument("--nvlink-GBps", type=float, default=150.0,
                   help="ASSUMED intra-node bandwidth per GPU (bytes/s / 1e9)")
    p.add_argument("--intra-latency-us", type=float, default=5.0, help="ASSUMED")
    p.add_argument("--inter-latency-us", type=float, default=10.0, help="ASSUMED")
    args = p.parse_args()
    if (args.compute_ms is not None and args.compute_ms <= 0) or args.nvlink_GBps <= 0:
        sys.exit("scaling_model: --compute-ms and --nvlink-GBps must be > 0")
    rows = load(args.measurements)
    model = calibrate(rows)
    out = []
    for key, (a, b) in sorted(model["link"].items()):
        out.append({"kind": "calibration", "link_mbit": key[0], "link_latency_us": key[1],
                    "link_loss": key[2], "flows": 1, "alpha_us": a * 1e6,
                    "beta_GBps": (1 / b / 1e9) if b > 0 else None})
    for key, (a, b) in sorted(model["shared"].items()):
        out.append({"kind": "calibration", "link_mbit": key[0], "link_latency_us": key[1],
                    "link_loss": key[2], "flows": model["ranks_per_host"], "alpha_us": a * 1e6,
                    "beta_GBps": (1 / b / 1e9) if b > 0 else None})
    a_i, b_i = model["intra"]
    out.append({"kind": "calibration", "link": "intra-host", "alpha_us": a_i * 1e6,
                "beta_GBps": (1 / b_i / 1e9) if b_i > 0 else None})
    for r in rows:
        if r["impl"] != "retort-hierarchical" or setting(r) == UNSHAPED:
            continue
        key = setting(r)
        pred = predict_hier(model, key, r["bytes"])
        meas = r["time_us"] * 1e-6
        out.append({"kind": "validation", "link_mbit": key[0], "link_latency_us": key[1],
                    "link_loss": key[2], "bytes": r["bytes"],
                    "predicted_ms": pred * 1e3, "measured_ms": meas * 1e3,
                    "error_pct": (pred - meas) / meas * 100,
                    "one_flow_predicted_ms": predict_hier(model, key, r["bytes"], False) * 1e3,
                    "flat_predicted_ms": predict_flat(model, key, r["bytes"]) * 1e3})
    if args.project:
        params, proj = project(args)
        for row in proj:
            out.append(dict(kind="projection", student_params=params, **row))
    if args.json:
        for o in out:
            print(json.dumps(o))
        return
    print("| calibration | flows per link | alpha (us) | beta (GB/s) |\n| --- | --- | --- | --- |")
    for o in out:
        if o["kind"] == "calibration":
            name = (describe((o["link_mbit"], o["link_latency_us"], o["link_loss"]))
                    if "link_mbit" in o else o["link"])
            beta = "n/a" if o["beta_GBps"] is None else f"{o['beta_GBps']:.3f}"
            print(f"| {name} | {o.get('flows', '-')} | {o['alpha_us']:.0f} | {beta} |")
    print("\n| link | bytes | hierarchical predicted (ms) | measured (ms) | error |"
          " predicted from 1-flow link terms (ms) |\n| --- | --- | --- | --- | --- | --- |")
    errors = []
    for o in out:
        if o["kind"] == "validation":
            errors.append(abs(o["error_pct"]))
            key = (o["link_mbit"], o["link_latency_us"], o["link_loss"])
            print(f"| {describe(key)} | {o['bytes']} | {o['predicted_ms']:.1f} | "
                  f"{o['measured_ms']:.1f} | {o['error_pct']:+.0f}% | "
                  f"{o['one_flow_predicted_ms']:.1f} |")
    if errors:
        within = sum(e <= 15 for e in errors)
        print(f"\nwithin 15%: {within} of {len(errors)} points; largest error {max(errors):.0f}%")
    if args.project:
        print(f"\nViT-S/16 student: {params} parameters, fp32 gradients "
              f"({params * 4 / 1e6:.0f} MB); batch {BATCH_PER_GPU} per GPU")
        for label, compute_ms in step_time_scenarios(args):
            print(f"\nStep time {compute_ms:.1f} ms ({label}):\n\n"
                  "| GPUs | nodes | link (Gb/s) | RS (ms) | RS+AG (ms) | efficiency, no overlap |"
                  " RS overlapped | RS overlapped, bf16 on the wire | step time for 90%, no "
                  "overlap (ms) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
            for o in out:
                if o["kind"] == "projection" and o["step_time"] == label:
                    print(f"| {o['gpus']} | {o['nodes']} | {o['link_Gbps']} | {o['rs_ms']:.1f} | "
                          f"{o['comm_ms']:.1f} | {o['efficiency_no_overlap']:.1%} | "
                          f"{o['efficiency_rs_overlapped']:.1%} | "
                          f"{o['efficiency_rs_overlapped_bf16']:.1%} | "
                          f"{o['compute_ms_for_90pct_no_overlap']:.0f} |")


if __name__ == "__main__":
    main()
