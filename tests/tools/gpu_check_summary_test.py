"""scripts/gpu_check_summary.py on made-up step results (ctest gpu_check_summary; CPU only,
standard library only: python3 -m unittest)."""
import contextlib
import io
import json
import os
import pathlib
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gpu_check_summary as g  # noqa: E402

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="Linux" tests="3">
 <testcase name="A.Passes" classname="A" time="1.5" status="run"><system-out>[ measured ] recovery_s=0.7</system-out></testcase>
 <testcase name="A.Fails" classname="A" time="2" status="fail"><failure message="boom"/></testcase>
 <testcase name="A.Skips" classname="A" time="0" status="run"><skipped/><system-out>x.cc:1: Skipped
no GPU visible</system-out></testcase>
</testsuite>
"""


class GpuCheckSummaryTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = pathlib.Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def test_the_table_fits_the_budget_and_the_file_limit(self):
        total = g.check_plan()
        assert total <= g.BUDGET_S == 540
        assert len(g.STEPS) + 1 <= g.MAX_OUT_FILES == 8
        assert g.STEP_NAMES[:2] == ("build", "kd") and g.STEP_NAMES[-1] == "teacher"


    def test_a_plan_over_budget_or_over_the_file_limit_is_refused(self):
        with self.assertRaisesRegex(ValueError, "over the 540 s budget"):
            g.check_plan(g.STEPS + (g.Step("extra", 60, ""),))
        many = tuple(g.Step(f"s{i}", 1, "") for i in range(8))
        with self.assertRaisesRegex(ValueError, "over the limit of 8"):
            g.check_plan(many)
        with self.assertRaisesRegex(ValueError, "parts take up to"):
            g.check_plan((g.Step("kd", 100, ""),))


    def test_the_summary_grows_step_by_step_in_the_table_order(self):
        out = str(self.tmp)
        g.init(out, ["tests", "build", "kd"], {"gpu": "NVIDIA H200"})
        s = g.load(out)
        assert s["order"] == ["build", "kd", "tests"]
        assert all(s["steps"][n]["status"] == "pending" for n in s["order"])
        g.start(out, "build")
        assert g.load(out)["steps"]["build"]["status"] == "running"
        g.record(out, "build", "passed", 61.24)
        kd = {"retort": {"samples_per_s": 1200.0, "mfu": 0.41, "impl": "retort"},
              "pytorch_eager": {"samples_per_s": 800.0},
              "pytorch_compile": {"error": "failed; see the log"},
              "speedup_vs_eager": 1.5, "speedup_vs_compile": None}
        g.record(out, "kd", "passed", 100, result=kd)
        s = g.load(out)
        assert s["meta"]["gpu"] == s["steps"]["kd"]["gpu"] == "NVIDIA H200"
        assert s["steps"]["build"] == {**s["steps"]["build"], "status": "passed", "seconds": 61.2}
        f = s["steps"]["kd"]["figures"]
        assert f["retort"] == {"samples_per_s": 1200.0, "mfu": 0.41}
        assert f["pytorch_compile"] == {"error": "failed; see the log"}
        assert f["speedup_vs_eager"] == 1.5
        assert s["steps"]["kd"]["result"] == kd
        assert s["steps"]["tests"]["status"] == "pending"
        assert not s["finished"]


    def test_a_timeout_is_recorded_and_fails_the_run_but_skipped_does_not(self):
        out = str(self.tmp)
        g.init(out, ["build", "tests", "teacher"])
        g.record(out, "build", "passed", 1)
        g.record(out, "teacher", "skipped", 0, reason="not built")
        s = g.finish(out, 3)
        assert s["passed"] is False  # tests still pending
        g.record(out, "tests", "timeout", 90, reason="ran past its 90 s bound")
        s = g.finish(out, 95)
        assert s["finished"] and s["within_budget"] and not s["passed"]
        assert s["steps"]["teacher"]["reason"] == "not built"
        g.record(out, "tests", "passed", 80)
        assert g.finish(out, 600)["passed"] and not g.load(out)["within_budget"]


    def test_ctest_results_are_counted_and_a_failed_test_fails_the_step(self):
        out = str(self.tmp / "out")
        g.init(out, ["tests"])
        junit = self.tmp / "tests.xml"
        junit.write_text(JUNIT)
        s = g.record(out, "tests", "passed", 5, junit=str(junit))
        t = s["steps"]["tests"]
        assert t["status"] == "failed"
        assert t["tests"]["counts"] == {"passed": 1, "failed": 1, "skipped": 1}
        assert t["tests"]["failed"] == ["A.Fails"]
        assert t["tests"]["skipped"] == {"A.Skips": "no GPU visible"}
        assert t["tests"]["measured"] == ["recovery_s=0.7"]


    def test_jpeg_figures_compare_with_the_kd_step_of_the_same_run(self):
        out = str(self.tmp)
        g.init(out, ["kd", "jpeg"])
        g.record(out, "kd", "passed", 1, result={"retort": {"samples_per_s": 1000.0}})
        jpeg = {"decode": {"results": [{"impl": "retort", "threads": 4, "images_per_s": 9000.0,
                                        "seconds": 3}]},
                "kd": {"retort_jpeg_input": {"samples_per_s": 950.0, "data_wait_fraction": 0.02}}}
        f = g.record(out, "jpeg", "passed", 1, result=jpeg)["steps"]["jpeg"]["figures"]
        assert f["decode"] == [{"impl": "retort", "threads": 4, "images_per_s": 9000.0}]
        assert f["kd_jpeg"]["data_wait_fraction"] == 0.02
        assert f["jpeg_vs_synthetic"] == 0.95
        staging = {"sizes": [{"of_slowest_stage": 0.9}, {"of_slowest_stage": 0.7}]}
        assert g.figures("staging", staging) == {"of_slowest_stage_min": 0.7}


    def test_more_than_eight_files_is_reported_and_long_logs_are_cut(self):
        out = str(self.tmp)
        g.init(out, ["build"])
        with open(os.path.join(out, "build.log"), "wb") as f:
            f.write(b"x" * 100 + b"END")
        assert g.check_out_files(out, max_log_bytes=10) is None
        data = (self.tmp / "build.log").read_bytes()
        assert data.endswith(b"xxxxxxxEND") and data.startswith(b"[cut to its last 10 bytes]")
        for i in range(7):
            open(os.path.join(out, f"extra{i}.log"), "w").close()
        s = g.record(out, "build", "passed", 1)
        assert "9 files" in s["out_files_error"]
        assert not g.finish(out, 1)["passed"]


    def test_a_reader_never_sees_a_partial_summary(self):
        out = str(self.tmp)
        g.init(out, ["build", "kd"])
        big = {"retort": {"samples_per_s": 1.0}, "padding": "y" * 200_000}
        stop = threading.Event()
        seen = []

        def read():
            while not stop.is_set():
                with open(os.path.join(out, g.SUMMARY)) as f:
                    seen.append(json.load(f)["steps"]["kd"]["status"])  # raises on a partial file

        reader = threading.Thread(target=read)
        reader.start()
        try:
            for i in range(30):
                g.record(out, "kd", "passed" if i % 2 else "failed", i, result=big)
        finally:
            stop.set()
            reader.join()
        assert seen and set(seen) <= {"pending", "passed", "failed"}
        assert g.out_files(out) == [g.SUMMARY]  # no temporary file left behind


    def test_result_files_give_their_last_json_line(self):
        p = self.tmp / "r.json"
        p.write_text('log line\n{"a": 1}\n{"b": 2}\ntrailing\n')
        assert g.read_result(str(p)) == {"b": 2}
        p.write_text("no json here\n")
        assert g.read_result(str(p)) is None
        assert g.read_result(str(self.tmp / "missing")) is None


    def test_the_cli_prints_the_plan_and_refuses_unknown_steps(self):
        def run(*argv):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                rc = g.main(list(argv))
            return rc, out.getvalue()

        rc, text = run("plan", "--steps", "build,kd")
        assert rc == 0 and "kd" in text and "tests" not in text and "budget 540 s" in text
        assert run("plan", "--steps", "build,nope")[0] == 2
        assert run("parts", "kd") == (0, "retort=30 eager=30 compile=70\n")


if __name__ == "__main__":
    unittest.main()
