// Validates Kubernetes objects against the Kubernetes OpenAPI schemas shipped (precompiled) in
// the kubernetes-models package, plus the strict unknown-field check. Offline.
import { existsSync } from "node:fs";
import { describe } from "./manifests.mjs";
import { modelDeclarationFile, unknownFields } from "./strict_fields.mjs";

// Returns a list of error messages for one object (empty when it is valid).
export async function validateObject(object) {
  const name = describe(object);
  if (typeof object.apiVersion !== "string" || typeof object.kind !== "string") {
    return [`${name}: apiVersion and kind must be strings`];
  }
  if (!existsSync(modelDeclarationFile(object.apiVersion, object.kind))) {
    return [`${name}: ${object.apiVersion} ${object.kind} is not a known Kubernetes kind`];
  }
  const module = await import(`kubernetes-models/${object.apiVersion}/${object.kind}`);
  const Model = module[object.kind] ?? module.default;
  const errors = [];
  try {
    new Model(object).validate();
  } catch (error) {
    errors.push(`${name}: schema: ${error.message}`);
  }
  for (const message of unknownFields(object)) errors.push(`${name}: ${message}`);
  return errors;
}
