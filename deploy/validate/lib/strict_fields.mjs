// Unknown-field check for Kubernetes objects, like `kubectl apply --validate=strict`.
// The Kubernetes OpenAPI schemas allow unknown properties, so a misspelt field (say
// `readinesProbe`) passes schema validation and is silently dropped by the API server. This
// walks an object next to the field lists of the kubernetes-models type declarations
// (`export interface IX { "field"?: Type; ... }`) and reports every field they do not declare.
import { readFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const modelsRoot = path.dirname(require.resolve("kubernetes-models/package.json"));
const nodeModules = path.dirname(modelsRoot);

// file -> { fields: Map(name -> TypeRef) } or null when the file declares no interface.
const interfaceCache = new Map();

// A type reference: { kind: "leaf" } | { kind: "object", file } | { kind: "array", of }
// | { kind: "map", of }.
function parseTypeExpression(expression, imports, file) {
  const text = expression.trim().replace(/;$/, "");
  const array = /^Array<(.+)>$/.exec(text);
  if (array) return { kind: "array", of: parseTypeExpression(array[1], imports, file) };
  const map = /^\{\s*\[key: string\]:\s*(.+?);?\s*\}$/s.exec(text);
  if (map) return { kind: "map", of: parseTypeExpression(map[1], imports, file) };
  if (/^I[A-Za-z0-9]+$/.test(text) && imports.has(text)) {
    return { kind: "object", file: imports.get(text) };
  }
  return { kind: "leaf" };
}

function resolveImport(fromFile, specifier) {
  let target;
  if (specifier.startsWith(".")) {
    target = path.resolve(path.dirname(fromFile), specifier.replace(/\.js$/, ""));
  } else {
    target = path.join(nodeModules, specifier.replace(/\.js$/, ""));
  }
  return `${target}.d.ts`;
}

function loadInterface(file) {
  if (interfaceCache.has(file)) return interfaceCache.get(file);
  if (!existsSync(file)) throw new Error(`type declaration not found: ${file}`);
  const text = readFileSync(file, "utf8");
  const imports = new Map();
  for (const match of text.matchAll(/^import \{ ([^}]+) \} from "([^"]+)";$/gm)) {
    for (const name of match[1].split(",").map((s) => s.trim())) {
      if (name.startsWith("I")) imports.set(name, resolveImport(file, match[2]));
    }
  }
  const body = /^export interface I\w+(?: extends [\w, ]+)? \{\n([\s\S]*?)^\}$/m.exec(text);
  if (!body) {
    interfaceCache.set(file, null);
    return null;
  }
  // Drop doc comments, then read `    "field"?: Type;` entries (a map type spans lines).
  const lines = body[1].replace(/\/\*\*[\s\S]*?\*\//g, "").split("\n");
  const fields = new Map();
  for (let i = 0; i < lines.length; i++) {
    const match = /^ {4}"([^"]+)"\??: (.*)$/.exec(lines[i]);
    if (!match) continue;
    let expression = match[2];
    while (expression.trim().endsWith("{") || /^\{[^}]*$/.test(expression.trim())) {
      i++;
      if (i >= lines.length) throw new Error(`${file}: unterminated type of ${match[1]}`);
      expression += ` ${lines[i].trim()}`;
    }
    fields.set(match[1], parseTypeExpression(expression, imports, file));
  }
  const parsed = { fields };
  interfaceCache.set(file, parsed);
  return parsed;
}

function walk(value, type, where, errors) {
  if (value === null || value === undefined) return;
  switch (type.kind) {
    case "leaf":
      return;
    case "array":
      if (Array.isArray(value)) value.forEach((v, i) => walk(v, type.of, `${where}[${i}]`, errors));
      return;
    case "map":
      if (typeof value === "object" && !Array.isArray(value)) {
        for (const [key, v] of Object.entries(value)) walk(v, type.of, `${where}.${key}`, errors);
      }
      return;
    case "object": {
      const declared = loadInterface(type.file);
      if (declared === null || typeof value !== "object" || Array.isArray(value)) return;
      const typeName = path.basename(type.file, ".d.ts");
      for (const [key, v] of Object.entries(value)) {
        const fieldType = declared.fields.get(key);
        if (fieldType === undefined) {
          errors.push(`${where || "."}: unknown field "${key}" (not a field of ${typeName})`);
        } else {
          walk(v, fieldType, `${where}.${key}`, errors);
        }
      }
      return;
    }
  }
}

// Model file of a top-level object: apiVersion "v1" -> v1/Kind, "apps/v1" -> apps/v1/Kind.
export function modelDeclarationFile(apiVersion, kind) {
  return path.join(modelsRoot, ...apiVersion.split("/"), `${kind}.d.ts`);
}

// Returns messages for every field of `object` that its Kubernetes type does not declare.
export function unknownFields(object) {
  const errors = [];
  walk(object, { kind: "object", file: modelDeclarationFile(object.apiVersion, object.kind) }, "", errors);
  return errors;
}
