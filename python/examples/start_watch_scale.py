#!/usr/bin/env python3
"""Starts a small distillation-free job on this machine, watches its events, scales it down
while it trains, and reads its result: the retort package end to end.

    .venv/bin/python3 python/examples/start_watch_scale.py --workers 2 --output-dir /tmp/ex

Needs the package (scripts/setup installs it) and the built binaries (scripts/build).
"""
from __future__ import annotations

import argparse
import threading

import retort


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--output-dir", default="retort-out/example")
    parser.add_argument("--bin-dir", default=None, help="where retort-run is (default: found)")
    args = parser.parse_args()

    spec = retort.JobSpec.build(
        name="example", student={"preset": "fm-student-p7"},
        dataset={"kind": "synthetic", "image_size": 28, "num_classes": 10,
                 "synthetic_samples": 512},
        global_batch=16, steps=args.steps, threads_per_worker=1, evaluate=False,
        elastic={"min_workers": 1, "max_workers": args.workers})
    spec.validate()  # the coordinator's rules, before anything starts

    job = retort.start(spec, workers=args.workers, output_dir=args.output_dir, fresh=True,
                       progress=None, bin_dir=args.bin_dir)
    try:
        with job.client() as client:
            def print_events() -> None:
                for event in client.watch():
                    print(f"event {event.kind}: {event.message}")

            threading.Thread(target=print_events, daemon=True).start()
            status = client.wait(lambda s: s.state == "running" and
                                 len([m for m in s.members if m.rank >= 0]) == args.workers,
                                 timeout=120)
            print(f"training: generation {status.generation}, step {status.step}, "
                  f"{len(status.members)} workers")
            if args.workers > 1:
                # Paused, so that a short job cannot end before the scale-down took effect.
                client.pause()
                client.wait(until="paused", timeout=60)
                client.scale(max_workers=args.workers - 1)
                status = client.wait(lambda s: len([m for m in s.members if m.rank >= 0]) ==
                                     args.workers - 1, timeout=60)
                print(f"scaled down: generation {status.generation}, step {status.step}, "
                      f"{len(status.members)} workers")
                client.resume()
        run = job.wait(timeout=600)
    except BaseException:
        job.stop()
        raise
    assert run.result is not None
    last = run.metrics_by_step()[-1]
    print(f"finished: {run.result.steps} steps, last loss {last['loss']:.4f} with "
          f"{last['world_size']} worker(s); weights {run.result.student_weights}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
