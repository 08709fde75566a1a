#!/usr/bin/env node
// Usage: node check-policy.mjs --accelerator=cpu|gpu RENDERED.yaml
// Checks one rendered overlay against retort's deployment rules (lib/policy.mjs) and its job
// spec against proto/retort/v1/retort.proto. Exits 1 naming each violation.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadManifests } from "./lib/manifests.mjs";
import { parseProtoMessages } from "./lib/job_spec.mjs";
import { checkPolicy } from "./lib/policy.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const accelerator = args.find((a) => a.startsWith("--accelerator="))?.split("=")[1];
const files = args.filter((a) => !a.startsWith("--"));
if (!["cpu", "gpu"].includes(accelerator) || files.length !== 1) {
  console.error("usage: node check-policy.mjs --accelerator=cpu|gpu RENDERED.yaml");
  process.exit(2);
}
const proto = parseProtoMessages(path.join(here, "..", "..", "proto", "retort", "v1", "retort.proto"));
const objects = loadManifests(files[0]);
const errors = checkPolicy(objects, accelerator, proto);
for (const message of errors) console.error(`${files[0]}: ${message}`);
console.log(`check-policy (${accelerator}): ${objects.length} objects, ${errors.length} problems`);
process.exit(errors.length === 0 ? 0 : 1);
