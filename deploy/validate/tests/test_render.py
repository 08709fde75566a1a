"""The render check and render-all (render.py) with a fake kubectl on a small kustomize tree."""
import unittest

from retort_deploy import render

from .fakes import env_with_path, make_fake_kubectl, run_script, temp_dir

NEW_KUBECTL = "Client Version: v1.32.4\nKustomize Version: v5.5.0"
OLD_KUBECTL = 'Client Version: version.Info{Major:"1", Minor:"20", GitVersion:"v1.20.15"}'
OUTPUT = {"cpu": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: retort\n", "gpu": "apiVersion: v1\nkind: List\n"}


class RenderTest(unittest.TestCase):
    def setUp(self):
        self.k8s = temp_dir(self, "retort-k8s-")
        (self.k8s / "base").mkdir()
        (self.k8s / "base" / "kustomization.yaml").write_text("resources: []\n", encoding="utf-8")
        for overlay in OUTPUT:
            (self.k8s / "overlays" / overlay).mkdir(parents=True)
            kustomization = self.k8s / "overlays" / overlay / "kustomization.yaml"
            kustomization.write_text("resources: [../../base]\n", encoding="utf-8")
        outputs = temp_dir(self, "retort-kustomize-output-")
        for overlay, text in OUTPUT.items():
            (outputs / f"{overlay}.yaml").write_text(text, encoding="utf-8")
        self.kubectl = env_with_path(make_fake_kubectl(self, NEW_KUBECTL, outputs))
        self.old_kubectl = env_with_path(make_fake_kubectl(self, OLD_KUBECTL, outputs))
        self.no_kubectl = env_with_path(temp_dir(self, "retort-empty-path-"), system=False)

    def run_render(self, *args, env):
        return run_script("render.py", *args, env=env)

    def rendered(self, overlay):
        return self.k8s / "rendered" / f"{overlay}.yaml"

    def test_render_all_writes_every_overlay_with_a_header_and_removes_orphans(self):
        (self.k8s / "rendered").mkdir()
        self.rendered("gone").write_text("kind: List\n", encoding="utf-8")
        status, output = self.run_render("write", self.k8s, env=self.kubectl)
        self.assertEqual(status, 0, output)
        for overlay, text in OUTPUT.items():
            written = self.rendered(overlay).read_text(encoding="utf-8")
            self.assertTrue(written.startswith("# Rendered from deploy/k8s/overlays/" + overlay), written)
            self.assertTrue(written.endswith(text))
            self.assertEqual(render.recorded_digest(written), render.sources_digest(self.k8s))
        self.assertFalse(self.rendered("gone").exists())

    def test_check_passes_when_the_committed_file_matches_a_fresh_render(self):
        self.run_render("write", self.k8s, env=self.kubectl)
        status, output = self.run_render("check", self.k8s, "cpu", env=self.kubectl)
        self.assertEqual(status, 0, output)

    def test_check_fails_with_a_diff_and_the_regenerate_command_on_a_mismatch(self):
        self.run_render("write", self.k8s, env=self.kubectl)
        path = self.rendered("cpu")
        path.write_text(path.read_text(encoding="utf-8").replace("name: retort", "name: other"), encoding="utf-8")
        status, output = self.run_render("check", self.k8s, "cpu", env=self.kubectl)
        self.assertEqual(status, 1, output)
        self.assertIn("-  name: other\n+  name: retort\n", output)
        self.assertIn("differs from a fresh render", output)
        self.assertIn("regenerate: deploy/validate/run-checks.sh render-all", output)

    def test_check_fails_when_the_committed_file_is_missing(self):
        status, output = self.run_render("check", self.k8s, "cpu", env=self.kubectl)
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"cpu.yaml missing; create it with deploy/validate/run-checks.sh render-all")

    def test_check_is_skipped_without_kubectl_or_with_one_too_old(self):
        self.run_render("write", self.k8s, env=self.kubectl)
        status, output = self.run_render("check", self.k8s, "cpu", env=self.no_kubectl)
        self.assertEqual(status, 77, output)
        self.assertIn("SKIPPED: kubectl not found", output)
        status, output = self.run_render("check", self.k8s, "cpu", env=self.old_kubectl)
        self.assertEqual(status, 77, output)
        self.assertRegex(output, r"SKIPPED: .*kubectl is 1\.20; kustomize v4\+ needs kubectl 1\.21")

    def test_check_without_kubectl_fails_when_the_sources_changed_after_rendering(self):
        self.run_render("write", self.k8s, env=self.kubectl)
        (self.k8s / "base" / "kustomization.yaml").write_text("resources: [pvc.yaml]\n", encoding="utf-8")
        status, output = self.run_render("check", self.k8s, "gpu", env=self.no_kubectl)
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"gpu.yaml is stale: deploy/k8s changed after it was rendered")

    def test_render_all_refuses_without_kubectl(self):
        status, output = self.run_render("write", self.k8s, env=self.no_kubectl)
        self.assertEqual(status, 1, output)
        self.assertIn("kubectl not found", output)


if __name__ == "__main__":
    unittest.main()
