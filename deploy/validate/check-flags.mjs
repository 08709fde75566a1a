#!/usr/bin/env node
// Usage: node check-flags.mjs --bin-dir=DIR [--readme=README.md] RENDERED.yaml...
// Checks that every container entrypoint in the rendered manifests is a retort binary installed
// at /opt/retort/bin, and that every flag the manifests (and the retortctl lines of the
// README) pass exists in that binary's --help output. The binaries are read from DIR (the
// build's tools/ folder); a missing binary is a failure, not a skip.
import { readFileSync } from "node:fs";
import path from "node:path";
import { loadManifests, containersOf, describe } from "./lib/manifests.mjs";
import { BINARIES, checkArgs, parseHelpFlags, readHelp } from "./lib/help_flags.mjs";

const args = process.argv.slice(2);
const option = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const binDir = option("bin-dir");
const readme = option("readme");
const files = args.filter((a) => !a.startsWith("--"));
if (!binDir || files.length === 0) {
  console.error("usage: node check-flags.mjs --bin-dir=DIR [--readme=README.md] RENDERED.yaml...");
  process.exit(2);
}

const errors = [];
const helpCache = new Map();
// Flags of `binary [subcommand] --help`, or null (error recorded) when it cannot be read.
function flagsOf(binary, subcommand) {
  const key = `${binary} ${subcommand ?? ""}`;
  if (!helpCache.has(key)) {
    try {
      const text = readHelp(path.join(binDir, binary), subcommand ? [subcommand] : []);
      const flags = parseHelpFlags(text);
      if (flags.size === 0) throw new Error(`${binary} --help lists no flags`);
      helpCache.set(key, { text, flags });
    } catch (error) {
      helpCache.set(key, null);
      if (!subcommand) errors.push(error.message);
    }
  }
  return helpCache.get(key);
}

let checked = 0;
for (const file of files) {
  for (const object of loadManifests(file)) {
    for (const { container } of containersOf(object)) {
      const where = `${file}: ${describe(object)} container ${container.name}`;
      const command = container.command ?? [];
      if (command.length !== 1) {
        errors.push(`${where}: command must be exactly the binary (flags go in args)`);
        continue;
      }
      const binary = path.posix.basename(command[0]);
      if (!BINARIES.includes(binary) || command[0] !== `/opt/retort/bin/${binary}`) {
        errors.push(`${where}: entrypoint ${command[0]} is not /opt/retort/bin/<one of ${BINARIES.join(", ")}>`);
        continue;
      }
      const help = flagsOf(binary);
      if (help === null) continue;
      errors.push(...checkArgs(container.args ?? [], help.flags, where));
      checked++;
    }
  }
}

// retortctl invocations in the README's code blocks: global flags from `retortctl --help`,
// subcommand flags from `retortctl SUB --help` when it lists its own.
if (readme) {
  const text = readFileSync(readme, "utf8");
  for (const [index, line] of text.split("\n").entries()) {
    const match = /^\s*(?:\$\s+)?retortctl\s+(.*)$/.exec(line);
    if (!match) continue;
    const where = `${readme}:${index + 1}`;
    const words = match[1].replace(/\s+#.*$/, "").split(/\s+/).filter(Boolean);
    const global = flagsOf("retortctl");
    if (global === null) break;
    const subcommand = words.find((w, i) => !w.startsWith("-") && !(i > 0 && /^--[\w-]+$/.test(words[i - 1]) && global.flags.get(words[i - 1].slice(2))?.takesValue));
    if (subcommand === undefined || !new RegExp(`(^|\\s)${subcommand}(\\s|$)`, "m").test(global.text)) {
      errors.push(`${where}: retortctl subcommand "${subcommand}" is not in retortctl --help`);
      continue;
    }
    const own = flagsOf("retortctl", subcommand);
    const flags = new Map([...global.flags, ...(own?.flags ?? [])]);
    errors.push(...checkArgs(words, flags, where));
    checked++;
  }
}

for (const message of errors) console.error(message);
console.log(`check-flags: ${checked} command lines, ${errors.length} problems`);
process.exit(errors.length === 0 && checked > 0 ? 0 : 1);
