// Checks a job spec (YAML, retort.v1.JobSpec with snake_case field names) against the message
// definitions in proto/retort/v1/retort.proto: unknown fields, wrong scalar types, and the
// rules the coordinator enforces that a manifest author can get wrong.
import { readFileSync } from "node:fs";

const SCALARS = {
  string: "string",
  bool: "boolean",
  double: "number",
  float: "number",
  int32: "integer",
  int64: "integer",
  uint32: "integer",
  uint64: "integer",
};

// Parses `message Name { [repeated] type field = N; ... }` blocks (non-nested) of a .proto file.
// Returns Map(message -> Map(field -> { type, repeated })).
export function parseProtoMessages(protoPath) {
  const text = readFileSync(protoPath, "utf8").replace(/\/\/.*$/gm, "");
  const messages = new Map();
  for (const match of text.matchAll(/\bmessage\s+(\w+)\s*\{([^{}]*)\}/g)) {
    const fields = new Map();
    for (const f of match[2].matchAll(/(repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*\d+\s*;/g)) {
      fields.set(f[3], { type: f[2], repeated: Boolean(f[1]) });
    }
    messages.set(match[1], fields);
  }
  return messages;
}

function checkMessage(value, messageName, messages, where, errors) {
  const fields = messages.get(messageName);
  if (fields === undefined) {
    errors.push(`${where}: message ${messageName} not found in the proto`);
    return;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    errors.push(`${where || "job"}: expected a mapping (${messageName})`);
    return;
  }
  for (const [key, v] of Object.entries(value)) {
    const field = fields.get(key);
    const at = where ? `${where}.${key}` : key;
    if (field === undefined) {
      errors.push(`${at}: unknown field (not in retort.v1.${messageName})`);
      continue;
    }
    const items = field.repeated ? (Array.isArray(v) ? v : [null]) : [v];
    if (field.repeated && !Array.isArray(v)) errors.push(`${at}: expected a list`);
    for (const item of items) {
      if (item === null) continue;
      const scalar = SCALARS[field.type];
      if (scalar === undefined) {
        checkMessage(item, field.type, messages, at, errors);
      } else if (scalar === "integer" ? !Number.isInteger(item) : typeof item !== scalar) {
        errors.push(`${at}: expected ${field.type}, got ${JSON.stringify(item)}`);
      }
    }
  }
}

// Returns error messages for a parsed job spec.
export function checkJobSpec(spec, messages) {
  const errors = [];
  checkMessage(spec, "JobSpec", messages, "", errors);
  if (errors.length > 0) return errors;
  if (!spec.name) errors.push("name: required");
  if ((spec.steps > 0) === (spec.epochs > 0)) errors.push("exactly one of steps or epochs must be positive");
  if (!(spec.global_batch > 0)) errors.push("global_batch: must be positive");
  for (const role of ["teacher", "student"]) {
    const model = spec[role] ?? {};
    if (Boolean(model.preset) === Boolean(model.torchscript_path)) {
      errors.push(`${role}: set exactly one of preset or torchscript_path`);
    }
  }
  const kinds = ["fashion-mnist", "image-folder", "synthetic"];
  if (!kinds.includes(spec.dataset?.kind)) errors.push(`dataset.kind: must be one of ${kinds.join(", ")}`);
  if (spec.precision !== undefined && !["float32", "bfloat16"].includes(spec.precision)) {
    errors.push("precision: must be float32 or bfloat16");
  }
  const elastic = spec.elastic ?? {};
  if (!(elastic.min_workers >= 1) || !(elastic.max_workers >= elastic.min_workers)) {
    errors.push("elastic: need 1 <= min_workers <= max_workers");
  }
  if (!spec.checkpoint?.dir) errors.push("checkpoint.dir: required (on storage shared by all pods)");
  return errors;
}
