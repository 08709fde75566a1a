"""The static Dockerfile checks and the image scripts, without Docker."""
import os
import re
import shutil
import subprocess
import unittest

from .fakes import assert_fails_naming, ROOT, replace_once, run_script, temp_dir

STAGE_SCRIPT = ROOT / "deploy" / "docker" / "build-in-container.sh"
BINARIES = ("retort-coordinator", "retort-worker", "retortctl")


def run(command, env=None):
    command = [str(c) for c in command]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)
    return result.returncode, result.stdout, result.stderr


class DockerCheckTest(unittest.TestCase):
    def fake_repo(self):
        """A copy of the repository's build inputs as far as check_docker.py reads them: every
        folder the top-level CMakeLists.txt adds, what the build reads besides, deploy/docker."""
        repo = temp_dir(self, "retort-repo-")
        cmake = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
        subdirs = re.findall(r"add_subdirectory\(\s*([\w-]+)", cmake)
        for item in ["CMakeLists.txt", ".clang-format", "cmake", "scripts", *subdirs]:
            source = ROOT / item
            if source.is_dir():
                shutil.copytree(source, repo / item, symlinks=True)
            elif source.exists():
                shutil.copy2(source, repo / item)
        shutil.copytree(ROOT / "deploy" / "docker", repo / "deploy" / "docker")
        return repo

    def edit(self, repo, name, old, new):
        path = repo / "deploy" / "docker" / name
        path.write_text(replace_once(self, path.read_text(encoding="utf-8"), old, new), encoding="utf-8")

    def test_the_committed_dockerfiles_pass(self):
        status, output = run_script("check_docker.py", ROOT)
        self.assertEqual(status, 0, output)

    def test_root_user_missing_copy_sources_compilers_and_baked_secrets_fail(self):
        repo = self.fake_repo()
        status, output = run_script("check_docker.py", repo)
        self.assertEqual(status, 0, f"the copy must pass before it is broken: {output}")
        self.edit(repo, "Dockerfile.cpu", "USER 10001:10001", "USER root")
        self.edit(repo, "Dockerfile.cpu", "COPY tools /src/tools", "COPY tool /src/tools")
        self.edit(repo, "Dockerfile.cpu", "xargs apt-get install", "xargs apt-get install g++")
        self.edit(repo, "Dockerfile.cuda", "ENV DEBIAN_FRONTEND=noninteractive", "ENV HF_TOKEN=abc")
        self.edit(repo, "Dockerfile.cuda", "COPY --from=libtorch", "COPY --from=torch")
        status, output = run_script("check_docker.py", repo)
        assert_fails_naming(self, status, output, [
            r"Dockerfile.cpu: final stage must end on a non-root USER",
            r"COPY source tool does not exist",
            r"Dockerfile.cpu: build stage does not COPY tools",
            r"Dockerfile.cpu:\d+: the final stage installs build tools",
            r"Dockerfile.cuda:\d+: ENV looks like a secret",
            r"--from=torch is neither an earlier stage nor a build context",
        ])

    def test_the_cuda_image_must_be_the_cuda_torch_is_built_for(self):
        repo = self.fake_repo()
        status, output = run_script("check_docker.py", "--torch-cuda=13.2", repo)
        self.assertEqual(status, 0, output)
        status, output = run_script("check_docker.py", "--torch-cuda=12.8", repo)
        assert_fails_naming(self, status, output, [
            r"Dockerfile.cuda: CUDA_VERSION is CUDA 13\.2, but the project builds against torch's LibTorch for CUDA 12\.8",
        ])
        self.edit(repo, "Dockerfile.cuda", "ARG CUDA_VERSION=13.2.0", "ARG CUDA_VERSION=latest")
        status, output = run_script("check_docker.py", "--torch-cuda=13.2", repo)
        assert_fails_naming(self, status, output, [r"Dockerfile.cuda: needs one build argument ARG CUDA_VERSION"])

    def test_an_entrypoint_that_is_not_a_retort_binary_fails(self):
        repo = self.fake_repo()
        self.edit(
            repo,
            "Dockerfile.cpu",
            'ENTRYPOINT ["/opt/retort/bin/retort-worker"]',
            'ENTRYPOINT ["/opt/retort/bin/retort-trainer"]',
        )
        status, output = run_script("check_docker.py", repo)
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"Dockerfile.cpu: ENTRYPOINT must be")

    def test_a_new_top_level_folder_the_build_needs_must_be_copied_into_the_build_stage(self):
        repo = self.fake_repo()
        cmake = repo / "CMakeLists.txt"
        cmake.write_text(cmake.read_text(encoding="utf-8") + "\nadd_subdirectory(launcher)\n", encoding="utf-8")
        status, output = run_script("check_docker.py", repo)
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"build stage does not COPY launcher")


class ImageScriptsTest(unittest.TestCase):
    def test_stage_only_stages_binaries_vendored_libraries_and_owning_packages(self):
        work = temp_dir(self, "retort-stage-")
        tools = work / "build" / "tools"
        vendor = work / "vendor"
        tools.mkdir(parents=True)
        vendor.mkdir()
        # Stand-ins for the binaries: a dynamically linked ELF program from a Debian package.
        for name in BINARIES:
            shutil.copy2("/usr/bin/protoc", tools / name)
        shutil.copy2("/usr/lib/x86_64-linux-gnu/libprotoc.so.32", vendor / "libprotoc.so.32")
        stage = work / "stage"
        env = {
            **os.environ,
            "RETORT_BUILD_DIR": str(work / "build"),
            "RETORT_RUNTIME_LIB_DIRS": str(vendor),
        }
        status, out, err = run([STAGE_SCRIPT, "--stage-only", ROOT, stage], env=env)
        self.assertEqual(status, 0, out + err)
        for name in BINARIES:
            self.assertTrue((stage / "opt" / "retort" / "bin" / name).exists(), name)
        self.assertTrue((stage / "opt" / "retort" / "lib" / "libprotoc.so.32").exists())
        packages = (stage / "runtime-packages.txt").read_text(encoding="utf-8").split()
        self.assertIn("libprotobuf32", packages)
        self.assertNotIn("libprotoc32", packages, "a vendored library must not be installed as a package too")

    def test_stage_only_fails_when_a_binary_was_not_built(self):
        work = temp_dir(self, "retort-stage-")
        (work / "build" / "tools").mkdir(parents=True)
        env = {**os.environ, "RETORT_BUILD_DIR": str(work / "build")}
        status, _, err = run([STAGE_SCRIPT, "--stage-only", ROOT, work / "stage"], env=env)
        self.assertEqual(status, 1, err)
        self.assertRegex(err, r"retort-coordinator was not built")

    def test_build_image_assembles_the_buildx_command_and_refuses_a_cuda_build_without_libtorch(self):
        script = ROOT / "deploy" / "docker" / "build-image.sh"
        status, out, err = run([script, "cpu", "--dry-run", "--tag", "reg.example/retort-cpu:1"])
        self.assertEqual(status, 0, err)
        self.assertRegex(
            out,
            r"docker buildx build --file \S+/deploy/docker/Dockerfile.cpu --tag reg.example/retort-cpu:1 --load \S+",
        )
        status, _, err = run([script, "cuda", "--dry-run"])
        self.assertEqual(status, 2)
        self.assertRegex(err, r"cuda needs --libtorch")
        libtorch = temp_dir(self, "libtorch-")
        (libtorch / "share" / "cmake" / "Torch").mkdir(parents=True)
        (libtorch / "share" / "cmake" / "Torch" / "TorchConfig.cmake").write_text("", encoding="utf-8")
        status, out, err = run([script, "cuda", "--dry-run", "--libtorch", libtorch])
        self.assertEqual(status, 0, err)
        self.assertRegex(out, r"--file \S+Dockerfile.cuda .*--build-context libtorch=\S+")


if __name__ == "__main__":
    unittest.main()
