// Tests of the static Dockerfile checks and of the image staging script, without Docker.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, writeFileSync, existsSync, mkdirSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..", "..");
const checker = path.join(root, "deploy", "validate", "check-docker.mjs");

// A copy of the repository's build inputs as far as check-docker reads them.
function fakeRepo() {
  const dir = mkdtempSync(path.join(tmpdir(), "retort-repo-"));
  // Every folder the top-level CMakeLists.txt adds, plus what the build reads besides.
  const subdirs = [...readFileSync(path.join(root, "CMakeLists.txt"), "utf8")
    .matchAll(/add_subdirectory\(\s*([\w-]+)/g)].map((m) => m[1]);
  for (const item of ["CMakeLists.txt", ".clang-format", "cmake", "scripts", ...subdirs]) {
    if (existsSync(path.join(root, item))) cpSync(path.join(root, item), path.join(dir, item), { recursive: true });
  }
  mkdirSync(path.join(dir, "deploy"));
  cpSync(path.join(root, "deploy", "docker"), path.join(dir, "deploy", "docker"), { recursive: true });
  return dir;
}

function check(repo) {
  const result = spawnSync("node", [checker, repo], { encoding: "utf8", timeout: 60000 });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

function edit(repo, file, from, to) {
  const full = path.join(repo, "deploy", "docker", file);
  const text = readFileSync(full, "utf8");
  assert.ok(text.includes(from), `${file} has no "${from}"`);
  writeFileSync(full, text.replace(from, to));
}

test("the committed Dockerfiles pass", () => {
  const result = check(root);
  assert.equal(result.status, 0, result.output);
});

test("root user, missing COPY sources, compilers and baked secrets in the final stage fail", () => {
  const repo = fakeRepo();
  assert.equal(check(repo).status, 0, "the copy must pass before it is broken");
  edit(repo, "Dockerfile.cpu", "USER 10001:10001", "USER root");
  edit(repo, "Dockerfile.cpu", "COPY tools /src/tools", "COPY tool /src/tools");
  edit(repo, "Dockerfile.cpu", "xargs apt-get install", "xargs apt-get install g++");
  edit(repo, "Dockerfile.cuda", "ENV DEBIAN_FRONTEND=noninteractive", "ENV HF_TOKEN=abc");
  edit(repo, "Dockerfile.cuda", "COPY --from=libtorch", "COPY --from=torch");
  const result = check(repo);
  assert.equal(result.status, 1);
  for (const expected of [
    /Dockerfile.cpu: final stage must end on a non-root USER/,
    /COPY source tool does not exist/,
    /Dockerfile.cpu: build stage does not COPY tools/,
    /Dockerfile.cpu:\d+: the final stage installs build tools/,
    /Dockerfile.cuda:\d+: ENV looks like a secret/,
    /--from=torch is neither an earlier stage nor a build context/,
  ]) {
    assert.match(result.output, expected);
  }
});

test("an entrypoint that is not a retort binary fails", () => {
  const repo = fakeRepo();
  edit(repo, "Dockerfile.cpu", 'ENTRYPOINT ["/opt/retort/bin/retort-worker"]', 'ENTRYPOINT ["/opt/retort/bin/retort-trainer"]');
  const result = check(repo);
  assert.equal(result.status, 1);
  assert.match(result.output, /Dockerfile.cpu: ENTRYPOINT must be/);
});

test("a new top-level folder the build needs must be copied into the build stage", () => {
  const repo = fakeRepo();
  const cmake = path.join(repo, "CMakeLists.txt");
  writeFileSync(cmake, `${readFileSync(cmake, "utf8")}\nadd_subdirectory(launcher)\n`);
  const result = check(repo);
  assert.equal(result.status, 1);
  assert.match(result.output, /build stage does not COPY launcher/);
});

test("build-in-container --stage-only stages binaries, vendored libraries and owning packages", () => {
  const work = mkdtempSync(path.join(tmpdir(), "retort-stage-"));
  const tools = path.join(work, "build", "tools");
  const vendor = path.join(work, "vendor");
  mkdirSync(tools, { recursive: true });
  mkdirSync(vendor);
  // Stand-ins for the binaries: a dynamically linked ELF program from a Debian package.
  for (const name of ["retort-coordinator", "retort-worker", "retortctl"]) copyFileSync("/usr/bin/protoc", path.join(tools, name));
  copyFileSync("/usr/lib/x86_64-linux-gnu/libprotoc.so.32", path.join(vendor, "libprotoc.so.32"));
  const stage = path.join(work, "stage");
  const result = spawnSync(path.join(root, "deploy", "docker", "build-in-container.sh"), ["--stage-only", root, stage], {
    encoding: "utf8",
    timeout: 60000,
    env: { ...process.env, RETORT_BUILD_DIR: path.join(work, "build"), RETORT_RUNTIME_LIB_DIRS: vendor },
  });
  assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
  for (const name of ["retort-coordinator", "retort-worker", "retortctl"]) {
    assert.ok(existsSync(path.join(stage, "opt", "retort", "bin", name)), name);
  }
  assert.ok(existsSync(path.join(stage, "opt", "retort", "lib", "libprotoc.so.32")));
  const packages = readFileSync(path.join(stage, "runtime-packages.txt"), "utf8").trim().split("\n");
  assert.ok(packages.includes("libprotobuf32"), packages.join(" "));
  assert.ok(!packages.includes("libprotoc32"), "a vendored library must not be installed as a package too");
});

test("build-in-container --stage-only fails when a binary was not built", () => {
  const work = mkdtempSync(path.join(tmpdir(), "retort-stage-"));
  mkdirSync(path.join(work, "build", "tools"), { recursive: true });
  const result = spawnSync(path.join(root, "deploy", "docker", "build-in-container.sh"), ["--stage-only", root, path.join(work, "stage")], {
    encoding: "utf8",
    env: { ...process.env, RETORT_BUILD_DIR: path.join(work, "build") },
  });
  assert.equal(result.status, 1);
  assert.match(result.stderr, /retort-coordinator was not built/);
});

test("build-image.sh assembles the buildx command and refuses a cuda build without LibTorch", () => {
  const script = path.join(root, "deploy", "docker", "build-image.sh");
  const cpu = spawnSync(script, ["cpu", "--dry-run", "--tag", "reg.example/retort-cpu:1"], { encoding: "utf8" });
  assert.equal(cpu.status, 0, cpu.stderr);
  assert.match(cpu.stdout, /docker buildx build --file \S+\/deploy\/docker\/Dockerfile.cpu --tag reg.example\/retort-cpu:1 --load \S+/);
  const noTorch = spawnSync(script, ["cuda", "--dry-run"], { encoding: "utf8" });
  assert.equal(noTorch.status, 2);
  assert.match(noTorch.stderr, /cuda needs --libtorch/);
  const libtorch = mkdtempSync(path.join(tmpdir(), "libtorch-"));
  mkdirSync(path.join(libtorch, "share", "cmake", "Torch"), { recursive: true });
  writeFileSync(path.join(libtorch, "share", "cmake", "Torch", "TorchConfig.cmake"), "");
  const cuda = spawnSync(script, ["cuda", "--dry-run", "--libtorch", libtorch], { encoding: "utf8" });
  assert.equal(cuda.status, 0, cuda.stderr);
  assert.match(cuda.stdout, /--file \S+Dockerfile.cuda .*--build-context libtorch=\S+/);
});
