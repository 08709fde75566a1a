// Tests of the deploy/ checkers: each must pass the committed overlays and fail, naming the
// problem, on a broken copy. Run with `node --test deploy/validate/test/`.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import path from "node:path";
import test from "node:test";
import { fileURLToPath } from "node:url";
import { HELP, makeFakeBinaries, writeTemp } from "./fakes.mjs";
import { checkArgs, parseHelpFlags } from "../lib/help_flags.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const validate = path.dirname(here);
const deploy = path.dirname(validate);
const renderCache = new Map();

function rendered(overlay) {
  if (!renderCache.has(overlay)) {
    const text = execFileSync("kubectl", ["kustomize", path.join(deploy, "k8s", "overlays", overlay)], { encoding: "utf8" });
    renderCache.set(overlay, text);
  }
  return renderCache.get(overlay);
}

function run(script, args) {
  const result = spawnSync("node", [path.join(validate, script), ...args], { encoding: "utf8", timeout: 60000 });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

function checkFlags(binDir, files, readme) {
  const args = [`--bin-dir=${binDir}`, ...files];
  if (readme) args.push(`--readme=${readme}`);
  return run("check-flags.mjs", args);
}

test("help parser reads value flags, switches and ignores prose", () => {
  const flags = parseHelpFlags("Usage: x\n  --listen=VALUE\n      Address --not-a-flag.\n  --json\n  --help\n");
  assert.deepEqual([...flags.keys()], ["listen", "json", "help"]);
  assert.equal(flags.get("listen").takesValue, true);
  assert.equal(flags.get("json").takesValue, false);
});

test("argument checker rejects unknown flags and missing values", () => {
  const flags = parseHelpFlags("  --listen=VALUE\n  --json\n");
  assert.deepEqual(checkArgs(["--listen=1", "--json", "--no-json", "--listen", "x"], flags, "t"), []);
  assert.deepEqual(checkArgs(["--lisen=1"], flags, "t"), ["t: unknown flag --lisen"]);
  assert.deepEqual(checkArgs(["--listen"], flags, "t"), ["t: --listen needs a value"]);
});

test("flag check passes the overlays and README with binaries that have every flag", () => {
  const bin = makeFakeBinaries();
  const files = ["cpu", "gpu"].map((o) => writeTemp(`${o}.yaml`, rendered(o)));
  const result = checkFlags(bin, files, path.join(deploy, "README.md"));
  assert.equal(result.status, 0, result.output);
});

test("flag check fails when a binary lacks a flag the manifests pass", () => {
  const help = { ...HELP, "retort-worker": HELP["retort-worker"].replace(/ {2}--health-listen=VALUE\n/, "") };
  const result = checkFlags(makeFakeBinaries(help), [writeTemp("cpu.yaml", rendered("cpu"))]);
  assert.equal(result.status, 1);
  assert.match(result.output, /container worker: unknown flag --health-listen/);
});

test("flag check fails (does not skip) when a binary is missing", () => {
  const result = checkFlags(makeFakeBinaries({ ...HELP, "retort-coordinator": null }), [writeTemp("cpu.yaml", rendered("cpu"))]);
  assert.equal(result.status, 1);
  assert.match(result.output, /missing binary .*retort-coordinator/);
});

test("flag check fails on a README retortctl line with an unknown subcommand or flag", () => {
  const readme = writeTemp("README.md", "```\nretortctl --coordinator=localhost:7070 status\nretortctl frobnicate\nretortctl --jsn status\n```\n");
  const result = checkFlags(makeFakeBinaries(), [writeTemp("cpu.yaml", rendered("cpu"))], readme);
  assert.equal(result.status, 1);
  assert.match(result.output, /README.md:3: retortctl subcommand "frobnicate"/);
  assert.match(result.output, /README.md:4: unknown flag --jsn/);
  assert.doesNotMatch(result.output, /README.md:2:/);
});

test("flag check rejects an entrypoint that is not a retort binary", () => {
  const text = rendered("cpu").replace("/opt/retort/bin/retort-worker", "/usr/bin/python3");
  const result = checkFlags(makeFakeBinaries(), [writeTemp("cpu.yaml", text)]);
  assert.equal(result.status, 1);
  assert.match(result.output, /entrypoint \/usr\/bin\/python3 is not/);
});

test("schema validation passes both overlays", () => {
  for (const overlay of ["cpu", "gpu"]) {
    const result = run("validate-schema.mjs", [writeTemp(`${overlay}.yaml`, rendered(overlay))]);
    assert.equal(result.status, 0, result.output);
  }
});

test("schema validation catches wrong types and misspelt fields at any depth", () => {
  const text = rendered("cpu")
    .replace("replicas: 1", "replicas: one")
    .replace("fieldPath: status.podIP", "fieldPth: status.podIP")
    .replace("readinessProbe:", "readinesProbe:");
  const result = run("validate-schema.mjs", [writeTemp("bad.yaml", text)]);
  assert.equal(result.status, 1);
  assert.match(result.output, /Deployment\/retort-coordinator: schema: .*replicas must be integer/);
  assert.match(result.output, /unknown field "fieldPth"/);
  assert.match(result.output, /unknown field "readinesProbe" \(not a field of Container\)/);
});

test("policy check passes each overlay and names violations in a broken one", () => {
  for (const overlay of ["cpu", "gpu"]) {
    const result = run("check-policy.mjs", [`--accelerator=${overlay}`, writeTemp(`${overlay}.yaml`, rendered(overlay))]);
    assert.equal(result.status, 0, result.output);
  }
  const broken = rendered("cpu")
    .replace("type: Recreate", "type: RollingUpdate")
    .replace("readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false")
    .replace("terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds: 5")
    .replace("- ReadWriteMany", "- ReadWriteOnce")
    .replace("global_batch: 256", "global_batch: 256\n    batch_size: 64")
    .replace("--coordinator=retort-coordinator.", "--coordinator=coordinator.")
    .replace("maxUnavailable: 1", "maxUnavailable: 3");
  const result = run("check-policy.mjs", ["--accelerator=cpu", writeTemp("broken.yaml", broken)]);
  assert.equal(result.status, 1);
  for (const expected of [
    /strategy must be Recreate/,
    /readOnlyRootFilesystem must be true/,
    /terminationGracePeriodSeconds must be >= 60/,
    /PersistentVolumeClaim\/retort-shared: must be ReadWriteMany/,
    /job spec: batch_size: unknown field \(not in retort.v1.JobSpec\)/,
    /--coordinator=coordinator\.\$\(POD_NAMESPACE\)\.svc:7070 is not the coordinator Service/,
    /needs a PodDisruptionBudget with maxUnavailable 1/,
  ]) {
    assert.match(result.output, expected);
  }
});

test("policy check requires GPUs and placement in the gpu overlay", () => {
  const result = run("check-policy.mjs", ["--accelerator=gpu", writeTemp("cpu.yaml", rendered("cpu"))]);
  assert.equal(result.status, 1);
  assert.match(result.output, /must request and limit nvidia.com\/gpu/);
  assert.match(result.output, /needs a nodeSelector/);
});
