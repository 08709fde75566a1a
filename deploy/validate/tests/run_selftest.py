"""run_manifests.py on broken copies of the cpu render, with the built binaries
(RETORT_BIN_DIR, set by `run-checks.sh run-selftest`): a flag the binary does not have and a
flag that means something else (every worker on local rank 0) must fail the run, naming the
pod or what came out wrong. Not discovered by the `selftest` check (it needs the build and
root); `run-selftest` runs it."""
import os
import unittest

from retort_deploy.netns import unavailable_reason

from .fakes import committed_render, replace_once, run_script, write_temp

BIN_DIR = os.environ.get("RETORT_BIN_DIR", "")


def setUpModule():
    if not os.access(os.path.join(BIN_DIR, "retort-worker"), os.X_OK):
        raise RuntimeError(f"RETORT_BIN_DIR={BIN_DIR!r} holds no retort-worker")
    reason = unavailable_reason()
    if reason:
        raise unittest.SkipTest(reason)


class RunManifestsTest(unittest.TestCase):
    def run_broken(self, old, new):
        path = write_temp(self, "cpu.yaml", replace_once(self, committed_render("cpu"), old, new))
        return run_script("run_manifests.py", f"--bin-dir={BIN_DIR}", "--timeout-s=60", path)

    def test_a_flag_the_binary_lacks_fails_naming_the_pod(self):
        status, output = self.run_broken("- --threads=$(RETORT_THREADS)", "- --thread=$(RETORT_THREADS)")
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"pod retort-worker-\d exited 2: its Job would not complete")
        self.assertIn("--thread", output)

    def test_a_local_rank_that_is_not_the_completion_index_fails_the_membership_check(self):
        status, output = self.run_broken("- --local-rank=$(POD_INDEX)", "- --local-rank=0")
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"the last generation's members \(node, local rank\) are .*'node-\d', 0\).*"
                                 r"not the worker pods' \(node, completion index\)")


if __name__ == "__main__":
    unittest.main()
