// Test helpers: fake retort binaries (shell scripts that print a --help text in the format of
// common/args.cc) in a temporary folder, and temporary manifest files.
import { chmodSync, mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const flag = (name, takesValue = true) => `  --${name}${takesValue ? "=VALUE" : ""}\n      ${name}\n`;

export const HELP = {
  "retort-coordinator": [
    "Usage: retort-coordinator [flags]\n\nFlags:\n",
    ...["listen", "state-dir", "job", "heartbeat-interval-ms", "eviction-timeout-ms", "settle-ms",
      "min-workers", "max-workers", "checkpoint-dir", "log-level"].map((f) => flag(f)),
    "  --help\n      Show this help and exit.\n",
  ].join(""),
  "retort-worker": [
    "Usage: retort-worker [flags]\n\nFlags:\n",
    ...["coordinator", "node", "local-rank", "data-address", "devices", "threads", "health-listen",
      "log-level"].map((f) => flag(f)),
    "  --help\n      Show this help and exit.\n",
  ].join(""),
  retortctl: [
    "Usage: retortctl [flags] COMMAND [args]\n\nFlags:\n",
    flag("coordinator"), flag("json", false), flag("timeout-ms"),
    "  --help\n      Show this help and exit.\n\nCommands:\n",
    "  status\n  watch\n  pause\n  resume\n  checkpoint\n  scale --min N --max N\n  drain ID\n  stop\n",
  ].join(""),
};

// Writes fake binaries into a new temporary folder and returns it. `help` maps a binary name
// to its help text; a binary mapped to null is left out.
export function makeFakeBinaries(help = HELP) {
  const dir = mkdtempSync(path.join(tmpdir(), "retort-fake-tools-"));
  for (const [name, text] of Object.entries(help)) {
    if (text === null) continue;
    const file = path.join(dir, name);
    const extra = name === "retortctl" ? "  --min=VALUE\n      min\n  --max=VALUE\n      max\n" : "";
    writeFileSync(file, `#!/bin/sh\ncase "$*" in\n  "scale --help") cat <<'HELP'\n${extra}HELP\n  ;;\n  *) cat <<'HELP'\n${text}HELP\n  ;;\nesac\n`);
    chmodSync(file, 0o755);
  }
  return dir;
}

// Writes `text` to a new temporary file named `name` and returns its path.
export function writeTemp(name, text) {
  const dir = mkdtempSync(path.join(tmpdir(), "retort-manifest-"));
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}
