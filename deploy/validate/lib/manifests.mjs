// Loads Kubernetes manifests (multi-document YAML, e.g. `kubectl kustomize` output) and walks
// the containers of workload objects. Pure functions, no I/O besides reading the named file.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

// Returns the non-empty documents of a multi-document YAML file as plain objects.
// Throws with the file name and the parser's message on malformed YAML.
export function loadManifests(path) {
  const text = readFileSync(path, "utf8");
  const objects = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) {
      throw new Error(`${path}: ${doc.errors[0].message}`);
    }
    const value = doc.toJS();
    if (value !== null && value !== undefined) objects.push(value);
  }
  return objects;
}

// "Kind/name" for messages.
export function describe(object) {
  return `${object?.kind ?? "<no kind>"}/${object?.metadata?.name ?? "<no name>"}`;
}

// The pod template spec of a workload object, or null for other kinds.
export function podSpecOf(object) {
  switch (object.kind) {
    case "Pod":
      return object.spec ?? null;
    case "Deployment":
    case "StatefulSet":
    case "DaemonSet":
    case "ReplicaSet":
    case "Job":
      return object.spec?.template?.spec ?? null;
    case "CronJob":
      return object.spec?.jobTemplate?.spec?.template?.spec ?? null;
    default:
      return null;
  }
}

// Every container (init and regular) of a workload object with its owner, for checks.
export function containersOf(object) {
  const spec = podSpecOf(object);
  if (spec === null) return [];
  return [...(spec.initContainers ?? []), ...(spec.containers ?? [])].map((container) => ({
    owner: object,
    podSpec: spec,
    container,
  }));
}
