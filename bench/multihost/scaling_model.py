#!/usr/bin/env python3
"""Alpha-beta (latency-bandwidth) model of retort's ZeRO-1 data plane, calibrated on test hosts.

Schedules modelled (collectives/README.md), H hosts x L ranks, n = H * L, S bytes. The link
part of a schedule costs c + k * a + B * b: c once per operation, a per ring step, b per byte
through the busiest host link (one direction); k steps and B bytes for each schedule:
  cross (a ring of one rank per host):            k = H-1, B = (H-1) * S/H
  interleaved flat ring (ranks dealt to hosts):   k = n-1, B = (n-1) * L * S/n  (L flows a link)
  flat ring, node-major (the one retort runs):    k = n-1, B = (n-1) * S/n      (one flow)
  hierarchical: intra-host RS over L, then inter-host RS among equal local indices:
    (L-1) * (a_i + S/L * b_i)  +  c + (H-1) * a + (H-1) * S/H * b
    (the L inter-host flows of a host share its link: L * S/(L*H) bytes per step)

Calibration, from shaped_links_bench JSON lines (reduce_scatter, several sizes, several link
settings -- rate, one-way latency, loss -- one run; with --rounds, the median of the rounds),
per link setting, by least squares of the relative error over the sizes, every term >= 0:
  c, a, b:  on `cross` and `ucx-interleaved` together (the two differ in steps per byte, which
            tells the per-operation cost from the per-step one); without interleaved lines,
            on `cross` alone with c = 0;
  a_i, b_i: on `intra` (a ring inside every host, all hosts at once: the intra-host level
            alone, under the same contention).
Validation: the hierarchical schedule and the node-major flat ring, the two retort runs, are
predicted at every setting from those terms (neither is fitted) and compared with their
measured times. The prediction assumes what the projection assumes: the levels add up, and L
flows share a link as well as one.

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

Usage: scaling_model.py MEASUREMENTS.jsonl [--project] [--json] [--svg-dir DIR]
"""
import argparse
import json
import os
import sys

import numpy as np

import svg_chart
from link_settings import describe, setting


def load(path):
    """The reduce_scatter lines of a shaped_links_bench file, one row per (implementation, link
    setting, size) with the median time of its rounds and their range."""
    groups = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if row.get("op") != "reduce_scatter":
                continue
            groups.setdefault((row["impl"], setting(row), row["bytes"]), []).append(row)
    if not groups:
        sys.exit(f"scaling_model: no reduce_scatter lines in {path}")
    rows = []
    for group in groups.values():
        times = sorted(r["time_us"] for r in group)
        rows.append(dict(group[0], time_us=float(np.median(times)), rounds=len(times),
                         time_us_min=times[0], time_us_max=times[-1]))
    return rows


def fit(xs, ys):
    """Least squares of the *relative* error of y = sum(coef_j * x_j), every coef_j >= 0 (a
    term that comes out negative is not identifiable from these sizes: it is dropped and the
    rest refitted). Relative, because the model is judged by its relative error: an absolute
    fit is decided by the largest size alone. Returns the coefficients as floats."""
    A = np.array(xs, dtype=float)
    y = np.array(ys, dtype=float)
    A, target = A / y[:, None], np.ones_like(y)
    active = list(range(A.shape[1]))
    while True:
        coef, *_ = np.linalg.lstsq(A[:, active], target, rcond=None)
        if min(coef) >= 0 or len(active) == 1:
            break
        del active[int(np.argmin(coef))]
    out = [0.0] * A.shape[1]
    for j, c in zip(active, coef):
        out[j] = max(0.0, float(c))
    return out


def link_terms(impl, H, L, s):
    """(1, k, B) of impl's cross-host part for S = s bytes: see the docstring."""
    n = H * L
    if impl in ("retort-cross", "retort-hierarchical"):  # inter-host level: a cross ring's bytes
        return (1, H - 1, (H - 1) * s / H)
    if impl == "retort-ucx-interleaved":
        return (1, n - 1, (n - 1) * L * s / n)
    if impl == "retort-ucx":
        return (1, n - 1, (n - 1) * s / n)
    raise ValueError(impl)


VALIDATED_IMPLS = {"retort-hierarchical": "hierarchical", "retort-ucx": "flat ring"}


def calibrate(rows):
    impls = {r["impl"] for r in rows}
    for need in ("retort-intra", "retort-cross", "retort-hierarchical"):
        if need not in impls:
            sys.exit(f"scaling_model: no {need} lines (run shaped_links_bench with "
                     "--backends=ucx,ucx-interleaved,hierarchical,intra,cross)")
    H = rows[0]["hosts"]
    L = rows[0]["ranks_per_host"]
    intra, link = {}, {}
    for key in sorted({setting(r) for r in rows}):
        at = [r for r in rows if setting(r) == key]
        runs = [r for r in at if r["impl"] == "retort-intra"]
        if len(runs) < 2:
            sys.exit(f"scaling_model: intra needs two sizes or more at {describe(key)}")
        intra[key] = fit([(L - 1, (L - 1) * r["bytes"] / L) for r in runs],
                         [r["time_us"] * 1e-6 for r in runs])
        runs = [r for r in at if r["impl"] in ("retort-cross", "retort-ucx-interleaved")]
        if len([r for r in runs if r["impl"] == "retort-cross"]) < 2:
            sys.exit(f"scaling_model: cross needs two sizes or more at {describe(key)}")
        xs = [link_terms(r["impl"], H, L, r["bytes"]) for r in runs]
        ys = [r["time_us"] * 1e-6 for r in runs]
        if not any(r["impl"] == "retort-ucx-interleaved" for r in runs):
            xs = [(0, x[1], x[2]) for x in xs]  # one ring length: c and a are one term
        link[key] = fit(xs, ys)
    return {"hosts": H, "ranks_per_host": L, "intra": intra, "link": link}


def predict(model, impl, key, s):
    """Predicted seconds of `impl`'s reduce-scatter of s bytes at link setting `key`."""
    H, L = model["hosts"], model["ranks_per_host"]
    c, a, b = model["link"][key]
    one, k, B = link_terms(impl, H, L, s)
    cross_host = one * c + k * a + B * b
    if impl == "retort-ucx":
        return cross_host
    a_i, b_i = model["intra"][key]
    return (L - 1) * (a_i + s / L * b_i) + cross_host


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


def write_figures(out, directory):
    """validation.svg (predicted vs measured) and, with --project, projection.svg (efficiency
    against GPUs) into `directory`."""
    os.makedirs(directory, exist_ok=True)
    # Log axes: a prediction of 0 (every term unidentifiable at that setting) is left out.
    validation = [o for o in out if o["kind"] == "validation" and o["predicted_ms"] > 0]
    if validation:
        chart = svg_chart.Chart("Alpha-beta model: predicted vs measured reduce-scatter",
                                "measured (ms)", "predicted (ms)", x_log=True, y_log=True,
                                width=520, height=400, legend="upper left")
        for schedule in VALIDATED_IMPLS.values():
            for limited, link in ((True, "rate-limited links"), (False, "no rate limit")):
                points = [(o["measured_ms"], o["predicted_ms"]) for o in validation
                          if o["schedule"] == schedule and (o["link_mbit"] > 0) == limited]
                if points:
                    chart.add_series(f"{schedule}, {link}", points, lines=False)
        lo = min(min(o["measured_ms"], o["predicted_ms"]) for o in validation) / 2
        hi = max(max(o["measured_ms"], o["predicted_ms"]) for o in validation) * 2
        chart.add_guide("predicted = measured", [(lo, lo), (hi, hi)], colour="#333333")
        chart.add_guide("+/-15%", [(lo, lo * 1.15), (hi, hi * 1.15)])
        chart.add_guide(None, [(lo, lo * 0.85), (hi, hi * 0.85)])
        with open(os.path.join(directory, "validation.svg"), "w") as f:
            f.write(svg_chart.figure([chart], columns=1))
    projection = [o for o in out if o["kind"] == "projection"]
    if not projection:
        return
    charts = []
    for label in dict.fromkeys(o["step_time"] for o in projection):
        rows = [o for o in projection if o["step_time"] == label]
        chart = svg_chart.Chart(f"{label}: {rows[0]['compute_ms']:.1f} ms/step", "GPUs",
                                "scaling efficiency (%)", x_log=True, y_range=(50, 100),
                                x_range=(6, 340), legend="lower left")
        chart.set_x_ticks([8, 64, 256])
        single = [o for o in rows if o["nodes"] == 1]
        for gbps in (100, 200, 400):
            linked = single + [o for o in rows if o["link_Gbps"] == gbps]
            colour = svg_chart.PALETTE[(100, 200, 400).index(gbps)]
            chart.add_series(f"{gbps} Gb/s, nothing overlapped",
                             [(o["gpus"], 100 * o["efficiency_no_overlap"]) for o in linked],
                             colour=colour)
            chart.add_series(f"{gbps} Gb/s, RS overlapped, bf16 wire",
                             [(o["gpus"], 100 * o["efficiency_rs_overlapped_bf16"])
                              for o in linked], dashed=True, colour=colour)
        chart.add_guide("90% goal", [(6, 90), (340, 90)])
        charts.append(chart)
    with open(os.path.join(directory, "projection.svg"), "w") as f:
        f.write(svg_chart.figure(charts, columns=2))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("measurements", help="shaped_links_bench JSON lines")
    p.add_argument("--project", action="store_true", help="also project to 8/64/256 GPUs")
    p.add_argument("--json", action="store_true", help="JSON lines only, no markdown")
    p.add_argument("--svg-dir", default=None,
                   help="also write validation.svg and (with --project) projection.svg here")
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
    for key, (a, b) in sorted(model["intra"].items()):
        out.append({"kind": "calibration", "level": "intra-host", "link_mbit": key[0],
                    "link_latency_us": key[1], "link_loss": key[2], "per_op_us": None,
                    "alpha_us": a * 1e6, "beta_GBps": (1 / b / 1e9) if b > 0 else None})
    for key, (c, a, b) in sorted(model["link"].items()):
        out.append({"kind": "calibration", "level": "host link", "link_mbit": key[0],
                    "link_latency_us": key[1], "link_loss": key[2], "per_op_us": c * 1e6,
                    "alpha_us": a * 1e6, "beta_GBps": (1 / b / 1e9) if b > 0 else None})
    for r in sorted(rows, key=lambda r: (r["impl"], setting(r), r["bytes"])):
        if r["impl"] not in VALIDATED_IMPLS or setting(r) not in model["link"]:
            continue
        key = setting(r)
        pred = predict(model, r["impl"], key, r["bytes"])
        meas = r["time_us"] * 1e-6
        out.append({"kind": "validation", "schedule": VALIDATED_IMPLS[r["impl"]],
                    "link_mbit": key[0], "link_latency_us": key[1], "link_loss": key[2],
                    "bytes": r["bytes"], "predicted_ms": pred * 1e3, "measured_ms": meas * 1e3,
                    "measured_ms_range": [r["time_us_min"] / 1e3, r["time_us_max"] / 1e3],
                    "rounds": r["rounds"], "error_pct": (pred - meas) / meas * 100})
    if args.project:
        params, proj = project(args)
        for row in proj:
            out.append(dict(kind="projection", student_params=params, **row))
    if args.svg_dir:
        write_figures(out, args.svg_dir)
    if args.json:
        for o in out:
            print(json.dumps(o))
        return
    print("| link | level | per operation c (us) | per step a (us) | bandwidth 1/b (GB/s) |\n"
          "| --- | --- | --- | --- | --- |")
    for o in out:
        if o["kind"] == "calibration":
            beta = "n/a" if o["beta_GBps"] is None else f"{o['beta_GBps']:.3f}"
            per_op = "-" if o["per_op_us"] is None else f"{o['per_op_us']:.0f}"
            key = (o["link_mbit"], o["link_latency_us"], o["link_loss"])
            print(f"| {describe(key)} | {o['level']} | {per_op} | {o['alpha_us']:.0f} | {beta} |")
    for schedule in VALIDATED_IMPLS.values():
        print(f"\n{schedule}:\n\n| link | bytes | predicted (ms) | measured (ms), median "
              "[range] | error |\n| --- | --- | --- | --- | --- |")
        errors = {}  # (rate-limited?, size class) -> |error| of each point
        for o in out:
            if o["kind"] == "validation" and o["schedule"] == schedule:
                group = (o["link_mbit"] > 0, o["bytes"] >= 1 << 20)
                errors.setdefault(group, []).append(abs(o["error_pct"]))
                key = (o["link_mbit"], o["link_latency_us"], o["link_loss"])
                lo, hi = o["measured_ms_range"]
                print(f"| {describe(key)} | {o['bytes']} | {o['predicted_ms']:.2f} | "
                      f"{o['measured_ms']:.2f} [{lo:.2f}-{hi:.2f}] ({o['rounds']}) | "
                      f"{o['error_pct']:+.0f}% |")
        print()
        for (limited, large), group in sorted(errors.items(), reverse=True):
            within = sum(e <= 15 for e in group)
            print(f"{schedule}, {'rate-limited links' if limited else 'no rate limit'}, "
                  f"{'1 MiB and more' if large else 'under 1 MiB'}: within 15% at {within} of "
                  f"{len(group)} points; largest error {max(group):.0f}%")
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
