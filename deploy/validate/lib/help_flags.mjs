// Reads the flags a retort binary accepts from its --help output and checks command lines
// against them. The help format (common/args.cc) lists each flag at the start of a line as
// `  --name=VALUE` (takes a value) or `  --name` (a switch; --no-name negates it).
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import path from "node:path";

// The binaries the project builds that manifests and docs may name.
export const BINARIES = ["retort-coordinator", "retort-worker", "retortctl"];

// Map(flag name -> { takesValue }) from help text.
export function parseHelpFlags(helpText) {
  const flags = new Map();
  for (const match of helpText.matchAll(/^ {2}--([a-z0-9][a-z0-9-]*)(=\S*)?(?=\s|$)/gm)) {
    flags.set(match[1], { takesValue: match[2] !== undefined });
  }
  return flags;
}

// Runs `binary args... --help` (bounded by a 10 s deadline) and returns its stdout; throws when
// the binary is missing, not executable, hangs, or prints no flag.
export function readHelp(binaryPath, args = []) {
  try {
    accessSync(binaryPath, constants.X_OK);
  } catch {
    throw new Error(`missing binary ${binaryPath} (build it: ninja -C <build> ${path.basename(binaryPath)})`);
  }
  const result = spawnSync(binaryPath, [...args, "--help"], { encoding: "utf8", timeout: 10000 });
  if (result.error) throw new Error(`${binaryPath} ${[...args, "--help"].join(" ")}: ${result.error.message}`);
  return `${result.stdout ?? ""}\n${result.stderr ?? ""}`;
}

// Checks a list of command-line arguments (flags only; positional words are skipped) against
// the accepted flags. Returns error messages naming each unknown or malformed flag.
export function checkArgs(args, flags, where) {
  const errors = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (!arg.startsWith("--")) continue;
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    let flag = flags.get(name);
    if (flag === undefined && name.startsWith("no-") && flags.get(name.slice(3))?.takesValue === false) {
      flag = flags.get(name.slice(3));
      if (eq >= 0) errors.push(`${where}: --${name} takes no value`);
      continue;
    }
    if (flag === undefined) {
      errors.push(`${where}: unknown flag --${name}`);
    } else if (flag.takesValue && eq < 0) {
      if (i + 1 >= args.length || args[i + 1].startsWith("--")) errors.push(`${where}: --${name} needs a value`);
      else i++;
    }
  }
  return errors;
}
