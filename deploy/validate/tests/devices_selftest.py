"""check_devices.py with the built retort-worker (RETORT_WORKER, set by `run-checks.sh devices`,
which first checks the committed renders): a GPU pod on `auto` passes, broken copies fail naming
the pod and the worker's reason; and the worker's --print-device mode the check relies on.
Not discovered by the `selftest` check (it needs the build); `devices` runs it."""
import os
import subprocess
import unittest

from .fakes import committed_render, replace_once, run_script, write_temp

WORKER = os.environ.get("RETORT_WORKER", "")


def setUpModule():
    if not os.access(WORKER, os.X_OK):
        raise RuntimeError(f"RETORT_WORKER={WORKER!r} is not an executable retort-worker")


class PrintDeviceTest(unittest.TestCase):
    """The binary's --print-device mode, which the check relies on."""

    def worker(self, *args):
        result = subprocess.run([WORKER, *args], capture_output=True, text=True, timeout=30, check=False)
        return result.returncode, result.stdout, result.stderr

    def test_one_visible_gpu_is_cuda0_for_any_local_rank(self):
        self.assertEqual(self.worker("--print-device", "--visible-devices=1", "--local-rank=3"), (0, "cuda:0\n", ""))

    def test_an_unresolvable_device_exits_2_naming_both_counts(self):
        status, out, err = self.worker("--print-device", "--visible-devices=2", "--local-rank=3")
        self.assertEqual((status, out), (2, ""))
        self.assertRegex(err, r"local rank 3.*sees 2 CUDA devices")

    def test_table_lists_every_local_rank(self):
        status, out, _ = self.worker("--print-device-table=3", "--visible-devices=2", "--device=cuda")
        self.assertEqual(status, 2)
        self.assertRegex(out, r"^local rank 0: cuda:0\nlocal rank 1: cuda:1\nlocal rank 2: error: ")


class DeviceCheckTest(unittest.TestCase):
    def check(self, overlay, text=None):
        path = write_temp(self, f"{overlay}.yaml", committed_render(overlay) if text is None else text)
        return run_script("check_devices.py", f"--worker={WORKER}", path)

    def test_auto_on_one_gpu_pods_is_cuda0_for_every_pod(self):
        text = replace_once(self, committed_render("gpu"), "- --device=$(RETORT_DEVICE)\n", "- --device=auto\n")
        status, output = self.check("gpu", text)
        self.assertEqual(status, 0, output)
        self.assertIn("32 worker pods, 0 problems", output)  # up to the job's elastic.max_workers

    def test_fails_when_pods_see_two_gpus_and_the_pod_index_picks_one(self):
        # The completion index is the local rank: unique per job, not 0..k-1 per node.
        text = replace_once(self, committed_render("gpu"), "- --device=$(RETORT_DEVICE)\n", "- --device=auto\n")
        text = text.replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"')
        status, output = self.check("gpu", text)
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"pod 1, seeing 2 GPU\(s\).*--devices=cuda:0 but this worker trains on cuda:1")
        self.assertRegex(output, r"pod 2, seeing 2 GPU\(s\).*local rank 2")
        self.assertNotRegex(output, r"pod 0,")

    def test_fails_when_the_device_names_a_gpu_the_pod_does_not_have(self):
        text = replace_once(self, committed_render("gpu"), "value: cuda:0", "value: cuda:1")
        status, output = self.check("gpu", text)
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"pod 0, .*cuda:1 does not exist: 1 CUDA device")

    def test_fails_when_the_reported_device_is_not_the_training_device(self):
        text = replace_once(self, committed_render("cpu"), "- --devices=$(RETORT_DEVICE)\n", "- --devices=cuda:0\n")
        status, output = self.check("cpu", text)
        self.assertEqual(status, 1, output)
        self.assertIn("--devices=cuda:0 but this worker trains on cpu", output)

    def test_fails_when_the_device_is_not_a_literal_value(self):
        text = replace_once(self, committed_render("cpu"), "- --device=$(RETORT_DEVICE)\n", "- --device=$(NODE_NAME)\n")
        status, output = self.check("cpu", text)
        self.assertEqual(status, 1, output)
        self.assertIn("$(NODE_NAME) has no literal env value", output)


if __name__ == "__main__":
    unittest.main()
