#!/usr/bin/env node
// Usage: node validate-schema.mjs RENDERED.yaml...
// Validates every object of rendered manifests against the Kubernetes API schemas (types,
// required fields, enums, formats) and rejects unknown fields. Exits 1 naming each problem.
import { loadManifests } from "./lib/manifests.mjs";
import { validateObject } from "./lib/schema.mjs";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate-schema.mjs RENDERED.yaml...");
  process.exit(2);
}
let failures = 0;
let count = 0;
for (const file of files) {
  for (const object of loadManifests(file)) {
    count++;
    for (const message of await validateObject(object)) {
      console.error(`${file}: ${message}`);
      failures++;
    }
  }
}
if (count === 0) {
  console.error("no objects to validate");
  process.exit(1);
}
console.log(`validate-schema: ${count} objects, ${failures} problems`);
process.exit(failures === 0 ? 0 : 1);
