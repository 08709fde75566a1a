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
# A test that needs a second GPU, and one whose skip ctest took for a pass (no
# SKIP_REGULAR_EXPRESSION): GoogleTest's "[  SKIPPED ]" line still says it skipped.
JUNIT_MORE_GPUS = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="Linux" tests="2">
 <testcase name="N.TwoRanks" classname="N" time="0" status="notrun"><skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/><system-out>n.cc:69: Skipped
needs two CUDA devices (one rank per device); 1 visible</system-out></testcase>
 <testcase name="J.Decodes" classname="J" time="0" status="run"><system-out>j.cc:67: Skipped
nvjpegCreateEx failed

[  SKIPPED ] J.Decodes (0 ms)</system-out></testcase>
</testsuite>
"""


class GpuCheckSummaryTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = pathlib.Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def test_the_table_fits_the_budget_with_slack_and_the_file_limit(self):
        total = g.check_table()
        assert total == g.check_plan() == g.plan_total(g.default_plan())
        assert g.BUDGET_S == 540 and g.MIN_SLACK_S == 60
        assert g.BUDGET_S - total >= 60
        assert len(g.STEPS) + 1 <= g.MAX_OUT_FILES == 8
        assert g.STEP_NAMES[:2] == ("build", "kd") and g.STEP_NAMES[-1] == "teacher"
        # The teacher compiles AOTInductor packages (minutes): only when asked for by name,
        # and then it fits beside the build.
        assert g.DEFAULT_STEPS == ("build", "kd", "tests", "staging", "jpeg")
        assert not g.step("teacher").default
        assert g.BUDGET_S - g.check_plan((g.step("build"), g.step("teacher"))) >= 60


    def test_a_plan_over_budget_without_slack_or_over_the_file_limit_is_refused(self):
        with self.assertRaisesRegex(ValueError, "over the 540 s budget"):
            g.check_plan(g.STEPS)  # the opt-in teacher with every default step
        with self.assertRaisesRegex(ValueError, "under the 60 s of slack"):
            g.check_plan(g.default_plan() + (g.Step("extra", 60, ""),))
        with self.assertRaisesRegex(ValueError, "under the 60 s of slack"):
            g.check_table(g.STEPS[:1] + (g.Step("long", 350, "", default=False),))
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
        # A report cut while ctest wrote it is named, and the others still count.
        cut = self.tmp / "tests.ctest2.xml"
        cut.write_text(JUNIT[:120])
        t = g.record(out, "tests", "passed", 5, junit=[str(junit), str(cut)])["steps"]["tests"]
        assert t["tests"]["unreadable_reports"] == ["tests.ctest2.xml"]
        assert t["tests"]["counts"] == {"passed": 1, "failed": 1, "skipped": 1}


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
        assert run("parts", "kd") == (0, "retort=25 eager=25 compile=70\n")
        rc, text = run("plan")
        assert rc == 0 and "teacher" in text.splitlines()[-1] and "opt-in" in text
        slack = int(text.split("slack ")[1].split(" s")[0])
        assert slack >= 60 and f"slack {g.BUDGET_S - g.check_plan()} s" in text
        rc, text = run("plan", "--steps", "build,kd,teacher")
        assert rc == 2  # over the budget: one at a time
        rc, text = run("table")
        assert rc == 0 and text.splitlines()[-1] == "teacher 300 teacher.log opt-in"
        assert text.splitlines()[0] == "build 160 build.log default"


    def test_rows_of_a_cut_step_stay_in_the_summary_and_make_its_figures(self):
        out = str(self.tmp)
        g.init(out, ["build", "jpeg"])
        g.start(out, "jpeg")
        kept = g.add_row(out, "jpeg", {"impl": "retort", "decode": "gpu", "threads": 4,
                                       "images_per_s": 9000.0},
                         {"part": "decode", "row": "retort_nvjpeg_4"})
        assert kept["part"] == "decode" and kept["images_per_s"] == 9000.0
        g.add_row(out, "jpeg", {"images": 1024, "processes": 16, "seconds": 1.5},
                  {"part": "fixture", "row": "jpegs"})
        # In the summary at once, before the step ends (a run killed now keeps it).
        assert len(g.load(out)["steps"]["jpeg"]["partial"]) == 2
        s = g.record(out, "jpeg", "timeout", 70, reason="ran past its 70 s bound")
        e = s["steps"]["jpeg"]
        assert e["status"] == "timeout" and len(e["partial"]) == 2 and "result" not in e
        assert e["figures"]["decode"] == [{"row": "retort_nvjpeg_4", "impl": "retort",
                                           "decode": "gpu", "threads": 4,
                                           "images_per_s": 9000.0}]
        assert e["figures"]["fixture"] == {"images": 1024, "processes": 16, "seconds": 1.5}
        # A re-run that passes: its result is made of its rows, no "partial" left.
        g.start(out, "jpeg")
        assert "partial" not in g.load(out)["steps"]["jpeg"]
        g.add_row(out, "jpeg", {"comparison": "kd_step_gpu",
                                "retort_jpeg_input": {"samples_per_s": 900.0,
                                                      "data_wait_fraction": 0.03}},
                  {"part": "kd_jpeg", "row": "retort_jpeg_input"})
        e = g.record(out, "jpeg", "passed", 60)["steps"]["jpeg"]
        assert "partial" not in e and e["figures"]["kd_jpeg"]["data_wait_fraction"] == 0.03
        assert e["result"]["kd"]["row"] == "retort_jpeg_input"
        # The build's rows: each target as it was built, kept when the build is cut.
        g.start(out, "build")
        g.add_row(out, "build", {"step": "kd", "status": "built", "seconds": 50.0},
                  {"part": "target", "row": "retort_gpu_check_kd"})
        e = g.record(out, "build", "timeout", 160)["steps"]["build"]
        assert e["figures"] == {"targets": {"kd": {"status": "built", "seconds": 50.0}}}


    def test_on_a_gpu_machine_a_skipped_gpu_test_fails_its_step(self):
        junit = self.tmp / "tests.ctest1.xml"
        junit.write_text(JUNIT.replace('status="fail"><failure message="boom"/>', 'status="run">')
                         .replace("no GPU visible", "no CUDA device visible to LibTorch"))
        other = self.tmp / "tests.ctest2.xml"
        other.write_text(JUNIT_MORE_GPUS)
        for meta, status in (({"gpus": 1, "rehearsal": 0}, "failed"),
                             ({"gpus": 0, "rehearsal": 1}, "passed"),
                             ({"gpus": 1, "rehearsal": 1}, "passed"),
                             ({"gpus": 0, "rehearsal": 0, "fake": 1}, "passed")):
            out = str(self.tmp / f"out{len(os.listdir(self.tmp))}")
            g.init(out, ["tests"], meta)
            e = g.record(out, "tests", "passed", 5, junit=[str(junit), str(other)])
            e = e["steps"]["tests"]
            assert e["status"] == status, (meta, e)
            assert e["tests"]["counts"] == {"passed": 2, "failed": 0, "skipped": 3}
            assert e["tests"]["skipped"]["J.Decodes"] == "nvjpegCreateEx failed"
            if status == "failed":
                assert e["reason"] == ("2 GPU test(s) skipped on a machine with a GPU (a failure "
                                       "there): A.Skips, J.Decodes")
                # A test that needs a second GPU is not a failure on one: "not exercised".
                assert e["tests"]["not_exercised"] == {
                    "N.TwoRanks": "needs two CUDA devices (one rank per device); 1 visible"}
                s = g.finish(out, 10)
                assert not s["passed"] and "N.TwoRanks" in s["not_exercised"]
                assert s["not_exercised"]["multi-rank NCCL"].startswith("not exercised: 1 GPU")
        # With two GPUs, a test that needs two and skips is a failure like any other.
        out = str(self.tmp / "two")
        g.init(out, ["tests"], {"gpus": 2, "rehearsal": 0})
        e = g.record(out, "tests", "passed", 5, junit=[str(other)])["steps"]["tests"]
        assert e["status"] == "failed" and e["tests"]["not_exercised"] == {}, e
        assert "multi-rank NCCL" not in g.finish(out, 5)["not_exercised"]


    def test_a_run_stopped_before_its_steps_says_why(self):
        out = str(self.tmp)
        g.init(out, ["build", "kd"], {"fake": 0})
        g.add_meta(out, {"gpu": "NVIDIA H200", "gpus": 1})
        s = g.abort(out, 2.5, "--debs needs dpkg-deb to unpack /x/debs")
        assert s["error"].startswith("--debs needs dpkg-deb") and s["finished"]
        assert not s["passed"] and s["meta"] == {"fake": 0, "gpu": "NVIDIA H200", "gpus": 1}
        assert s["steps"]["build"]["status"] == "pending"
        assert s["not_exercised"]["multi-rank NCCL"].startswith("not exercised: 1 GPU")
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            assert g.main(["abort", out, "1", "again"]) == 1
        assert printed.getvalue() == "build=pending(0 s) kd=pending(0 s)\n"
        assert g.load(out)["error"] == "again"


if __name__ == "__main__":
    unittest.main()
