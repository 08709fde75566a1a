#!/usr/bin/env node
// Usage: node check-docker.mjs REPO_ROOT
// Static checks of deploy/docker (no Docker engine needed): every Dockerfile is multi-stage;
// every COPY source exists in the repository (the build context) or names an earlier stage or
// a build context that build-image.sh passes; the build stage copies every folder the
// top-level CMakeLists.txt adds; the final stage copies only from the build stage, installs no
// compiler, runs as a non-root USER and starts a retort binary that build-in-container.sh
// installs; nothing secret is baked in; every script parses (bash -n) and is executable.
import { accessSync, constants, existsSync, readdirSync, readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { copyParts, parseDockerfile } from "./lib/dockerfile.mjs";
import { BINARIES } from "./lib/help_flags.mjs";

const root = process.argv[2];
if (!root) {
  console.error("usage: node check-docker.mjs REPO_ROOT");
  process.exit(2);
}
const dockerDir = path.join(root, "deploy", "docker");
const errors = [];
const read = (file) => readFileSync(path.join(root, file), "utf8");

const buildImage = read("deploy/docker/build-image.sh");
const namedContexts = new Set([...buildImage.matchAll(/--build-context "?(\w+)=/g)].map((m) => m[1]));
const inContainer = read("deploy/docker/build-in-container.sh");
const installed = /^binaries=\(([^)]*)\)/m.exec(inContainer)?.[1].split(/\s+/).filter(Boolean) ?? [];
if (JSON.stringify([...installed].sort()) !== JSON.stringify([...BINARIES].sort())) {
  errors.push(`build-in-container.sh installs [${installed}] but the project's binaries are [${BINARIES}]`);
}
if (!/"\$src\/scripts\/build"/.test(inContainer)) errors.push("build-in-container.sh must build with scripts/build");

// Folders and files the top-level CMakeLists.txt needs, relative to the repository root.
// Subdirectories under an `if(OPTION)` that build-in-container.sh turns OFF are not needed.
const disabled = new Set([...inContainer.matchAll(/-D(\w+)=OFF/g)].map((m) => m[1]));
const needed = new Set(["CMakeLists.txt"]);
const conditions = [];
for (const line of read("CMakeLists.txt").split("\n")) {
  const open = /^\s*if\((.*)\)\s*$/.exec(line);
  if (open) conditions.push(open[1]);
  else if (/^\s*endif\(/.test(line)) conditions.pop();
  const off = conditions.some((c) => c.split(/\s+AND\s+/).some((term) => disabled.has(term.trim())));
  const sub = /add_subdirectory\((\w+)\)/.exec(line);
  if (sub && !off) needed.add(sub[1]);
  if (/(?:include|configure_file)\(cmake\//.test(line)) needed.add("cmake");
}

const dockerfiles = readdirSync(dockerDir).filter((f) => /^Dockerfile(\.\w+)?$/.test(f));
if (dockerfiles.length === 0) errors.push("no Dockerfile in deploy/docker");
for (const file of dockerfiles) {
  const where = `deploy/docker/${file}`;
  const { globalArgs, stages } = parseDockerfile(readFileSync(path.join(dockerDir, file), "utf8"));
  if (stages.length < 2) {
    errors.push(`${where}: must be multi-stage (build, then a runtime stage)`);
    continue;
  }
  for (const stage of stages) {
    for (const m of (stage.from ?? "").matchAll(/\$\{?(\w+)/g)) {
      if (!globalArgs.includes(m[1])) errors.push(`${where}:${stage.line}: FROM uses undeclared ARG ${m[1]}`);
    }
  }
  const stageNames = stages.map((s) => s.name);
  const final = stages[stages.length - 1];
  stages.forEach((stage, index) => {
    const isFinal = stage === final;
    const copied = new Set();
    for (const { keyword, args, line } of stage.instructions) {
      const at = `${where}:${line}`;
      if (keyword === "ADD") errors.push(`${at}: use COPY, not ADD`);
      if (keyword === "ENV" || keyword === "ARG") {
        if (/\b\w*(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|PRIVATE_KEY)\w*\s*=/i.test(args)) {
          errors.push(`${at}: ${keyword} looks like a secret; mount secrets at run time`);
        }
      }
      if (keyword === "RUN" && isFinal && /(^|[\s;&|])(build-essential|g\+\+|gcc|clang|cmake|ninja-build|cuda-toolkit\S*|[\w.+-]+-dev)(?=$|[\s;&|])/.test(args.replace(/command -v \S+/g, ""))) {
        errors.push(`${at}: the final stage installs build tools`);
      }
      if (keyword !== "COPY" && keyword !== "ADD") continue;
      const { flags, sources } = copyParts(args);
      if (flags.from !== undefined) {
        const earlier = stageNames.slice(0, index).includes(flags.from);
        if (!earlier && !namedContexts.has(flags.from)) {
          errors.push(`${at}: --from=${flags.from} is neither an earlier stage nor a build context build-image.sh passes`);
        }
        if (isFinal && !stageNames.slice(0, index).includes(flags.from)) {
          errors.push(`${at}: the final stage copies only from the build stage`);
        }
        continue;
      }
      if (isFinal) errors.push(`${at}: the final stage copies only from the build stage, not sources`);
      for (const source of sources) {
        if (/[*?[]/.test(source)) errors.push(`${at}: name COPY sources exactly (no wildcards): ${source}`);
        else if (!existsSync(path.join(root, source))) errors.push(`${at}: COPY source ${source} does not exist in the repository`);
        if (/secret|token|\.pem$|\.key$|credentials/i.test(source)) errors.push(`${at}: COPY of ${source} bakes a secret into the image`);
        copied.add(source.replace(/\/$/, ""));
      }
    }
    if (index === 0) {
      for (const item of needed) {
        if (!copied.has(item)) errors.push(`${where}: build stage does not COPY ${item} (added by the top-level CMakeLists.txt)`);
      }
    }
  });
  const users = final.instructions.filter((i) => i.keyword === "USER");
  const user = users[users.length - 1]?.args;
  if (!user || /^(0|root)(:|$)/.test(user)) errors.push(`${where}: final stage must end on a non-root USER`);
  const lastUser = final.instructions.lastIndexOf(users[users.length - 1]);
  if (final.instructions.slice(lastUser + 1).some((i) => i.keyword === "RUN")) {
    errors.push(`${where}: RUN after USER in the final stage (runs as the unprivileged user?)`);
  }
  const entry = final.instructions.filter((i) => i.keyword === "ENTRYPOINT").pop();
  let entrypoint;
  try {
    entrypoint = JSON.parse(entry?.args ?? "null");
  } catch {
    entrypoint = null;
  }
  if (!Array.isArray(entrypoint) || !BINARIES.some((b) => entrypoint[0] === `/opt/retort/bin/${b}`)) {
    errors.push(`${where}: ENTRYPOINT must be an exec-form /opt/retort/bin/<one of ${BINARIES.join(", ")}>`);
  }
  if (!final.instructions.some((i) => i.keyword === "COPY" && /--from=\S+\s+\/stage\/opt\/retort\s+\/opt\/retort$/.test(i.args))) {
    errors.push(`${where}: final stage must COPY /stage/opt/retort from the build stage to /opt/retort`);
  }
  if (!existsSync(path.join(dockerDir, `${file}.dockerignore`))) errors.push(`${where}: missing ${file}.dockerignore`);
}
if (!/\/src\/scripts\/setup/.test(read("deploy/docker/Dockerfile.cpu"))) {
  errors.push("deploy/docker/Dockerfile.cpu: must install through scripts/setup");
}

// Every shell script under deploy/ parses and is executable.
const scripts = [];
const walk = (dir) => {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules") continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full);
    else if (entry.name.endsWith(".sh")) scripts.push(full);
  }
};
walk(path.join(root, "deploy"));
for (const script of scripts) {
  const result = spawnSync("bash", ["-n", script], { encoding: "utf8" });
  if (result.status !== 0) errors.push(`${script}: bash -n: ${result.stderr.trim()}`);
  try {
    accessSync(script, constants.X_OK);
  } catch {
    errors.push(`${script}: not executable`);
  }
}

for (const message of errors) console.error(message);
console.log(`check-docker: ${dockerfiles.length} Dockerfiles, ${scripts.length} scripts, ${errors.length} problems`);
process.exit(errors.length === 0 ? 0 : 1);
