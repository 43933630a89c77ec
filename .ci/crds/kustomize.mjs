// Renders a kustomization directory without kubectl: the objects `kubectl kustomize
// DIR` would print, for the part of kustomize that kubernetes/ uses — `resources`
// (files and directories), `components`, `configMapGenerator` (files, labels; the
// name suffixed with kustomize's hash of the content, and the references to it in
// pod templates renamed) and `images`. Any other field, in a Kustomization or a
// Component, is an error rather than something silently left out. Where kubectl
// is installed, .ci/validate-kubernetes checks that both render the same objects.
//
//   node .ci/crds/kustomize.mjs DIR > rendered.yaml
//   node .ci/crds/kustomize.mjs DIR --same-as RENDERED.yaml   (exit 1 if they differ)
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { parse, parseAllDocuments, stringify } from "yaml";

const understood = {
  Kustomization: ["apiVersion", "kind", "resources", "components", "configMapGenerator", "images"],
  Component: ["apiVersion", "kind", "resources"],
};
const apiVersions = {
  Kustomization: "kustomize.config.k8s.io/v1beta1",
  Component: "kustomize.config.k8s.io/v1alpha1",
};

class RenderError extends Error {}

function fail(where, message) {
  throw new RenderError(`${where}: ${message}`);
}

function kustomizationFile(dir) {
  for (const name of ["kustomization.yaml", "kustomization.yml", "Kustomization"]) {
    if (existsSync(join(dir, name))) return join(dir, name);
  }
  fail(dir, "no kustomization.yaml");
}

// The kustomization in `dir`, checked to be a `kind` this renderer understands.
function load(dir, kind) {
  const file = kustomizationFile(dir);
  const k = parse(readFileSync(file, "utf8")) ?? {};
  if (k.kind !== kind) fail(file, `kind ${k.kind}, expected ${kind}`);
  if (k.apiVersion !== apiVersions[kind]) fail(file, `apiVersion ${k.apiVersion}, expected ${apiVersions[kind]}`);
  for (const field of Object.keys(k)) {
    if (!understood[kind].includes(field)) {
      fail(file, `${field}: not understood here (render it with kubectl kustomize)`);
    }
  }
  return { file, k };
}

function objectsOf(file) {
  const objects = [];
  for (const document of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (document.errors.length > 0) fail(file, `not YAML: ${document.errors[0].message}`);
    const object = document.toJS();
    if (object !== null) objects.push(object);
  }
  return objects;
}

// Every object `resources` names, in order: a file's objects, a directory's render.
function resources(dir, list) {
  const objects = [];
  for (const entry of list ?? []) {
    const path = resolve(dir, entry);
    if (!existsSync(path)) fail(dir, `resource ${entry} does not exist`);
    objects.push(...(statSync(path).isDirectory() ? render(path) : objectsOf(path)));
  }
  return objects;
}

// Go's json.Marshal: sorted keys (the objects here are built sorted), and <, >, &,
// U+2028 and U+2029 escaped, as kustomize's hash reads them.
function goJson(value) {
  return JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
}

// kustomize's suffix for a ConfigMap: the first ten hex digits of the SHA-256 of
// its kind, name and data as JSON, with 0, 1, 3, a and e swapped for letters. The
// name is empty: kustomize 5 looks it up as one field called "metadata/name" and
// finds none.
function hashSuffix(configMap) {
  const sortedData = Object.fromEntries(Object.entries(configMap.data).sort(([a], [b]) => (a < b ? -1 : 1)));
  const encoded = goJson({ data: sortedData, kind: "ConfigMap", name: "" });
  const hex = createHash("sha256").update(encoded).digest("hex").slice(0, 10);
  const swap = { 0: "g", 1: "h", 3: "k", a: "m", e: "t" };
  return [...hex].map((c) => swap[c] ?? c).join("");
}

function generateConfigMaps(dir, generators) {
  return (generators ?? []).map((generator) => {
    for (const field of Object.keys(generator)) {
      if (!["name", "files", "options"].includes(field)) fail(dir, `configMapGenerator ${generator.name}: ${field} not understood here`);
    }
    for (const field of Object.keys(generator.options ?? {})) {
      if (field !== "labels") fail(dir, `configMapGenerator ${generator.name}: options.${field} not understood here`);
    }
    const data = {};
    for (const entry of generator.files ?? []) {
      const [key, path] = entry.includes("=") ? entry.split("=", 2) : [basename(entry), entry];
      const file = resolve(dir, path);
      if (!existsSync(file)) fail(dir, `configMapGenerator ${generator.name}: ${path} does not exist`);
      data[key] = readFileSync(file, "utf8");
    }
    const metadata = { name: generator.name };
    if (generator.options?.labels) metadata.labels = generator.options.labels;
    const configMap = { apiVersion: "v1", kind: "ConfigMap", metadata, data };
    return { original: generator.name, configMap: { ...configMap, metadata: { ...metadata, name: `${generator.name}-${hashSuffix(configMap)}` } } };
  });
}

// The pod templates' references to a generated ConfigMap follow its new name.
function renameConfigMapReferences(objects, renamed) {
  const rename = (holder, field) => {
    if (holder && renamed.has(holder[field])) holder[field] = renamed.get(holder[field]);
  };
  for (const object of objects) {
    const pod = object.spec?.template?.spec;
    if (!pod) continue;
    for (const volume of pod.volumes ?? []) {
      rename(volume.configMap, "name");
      for (const source of volume.projected?.sources ?? []) rename(source.configMap, "name");
    }
    for (const container of [...(pod.containers ?? []), ...(pod.initContainers ?? [])]) {
      for (const env of container.env ?? []) rename(env.valueFrom?.configMapKeyRef, "name");
      for (const from of container.envFrom ?? []) rename(from.configMapRef, "name");
    }
  }
}

function setImages(objects, images) {
  for (const image of images ?? []) {
    for (const object of objects) {
      const pod = object.spec?.template?.spec;
      for (const container of [...(pod?.containers ?? []), ...(pod?.initContainers ?? [])]) {
        const [, name, tag] = container.image.match(/^([^:@]+)(.*)$/);
        if (name !== image.name) continue;
        container.image = (image.newName ?? name) + (image.newTag !== undefined ? `:${image.newTag}` : tag);
      }
    }
  }
}

// A Kustomization's objects: its resources, then its components' resources, then
// the ConfigMaps it generates; then its images and the generated names applied.
function render(dir) {
  const { k } = load(dir, "Kustomization");
  const objects = resources(dir, k.resources);
  for (const entry of k.components ?? []) {
    const componentDir = resolve(dir, entry);
    if (!existsSync(componentDir) || !statSync(componentDir).isDirectory()) fail(dir, `component ${entry} is not a directory`);
    const { k: component } = load(componentDir, "Component");
    objects.push(...resources(componentDir, component.resources));
  }
  const generated = generateConfigMaps(dir, k.configMapGenerator);
  objects.push(...generated.map((g) => g.configMap));
  renameConfigMapReferences(objects, new Map(generated.map((g) => [g.original, g.configMap.metadata.name])));
  setImages(objects, k.images);
  const seen = new Set();
  for (const object of objects) {
    const id = `${object.apiVersion} ${object.kind} ${object.metadata?.name}`;
    if (seen.has(id)) fail(dir, `${id} appears twice`);
    seen.add(id);
  }
  return objects;
}

// An object as JSON with its keys sorted at every level, to compare two renders.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

// Fails unless `objects` and the objects of `file` are the same, in any order.
function sameAs(objects, file) {
  const ours = objects.map(canonical).sort();
  const theirs = objectsOf(file).map(canonical).sort();
  const missing = theirs.filter((o) => !ours.includes(o));
  const extra = ours.filter((o) => !theirs.includes(o));
  if (missing.length > 0 || extra.length > 0) {
    const lines = [...missing.map((o) => `only there: ${o}`), ...extra.map((o) => `only here: ${o}`)];
    fail(file, `renders otherwise than this renderer:\n  ${lines.map((l) => l.slice(0, 400)).join("\n  ")}`);
  }
}

try {
  const [dir, option, file] = process.argv.slice(2);
  if (!dir || (option !== undefined && (option !== "--same-as" || !file))) {
    fail("usage", "node .ci/crds/kustomize.mjs DIR [--same-as RENDERED.yaml]");
  }
  const objects = render(resolve(dir));
  if (option) {
    sameAs(objects, file);
    console.log(`INFO ${dir}: renders the same ${objects.length} objects as ${file}`);
  } else {
    process.stdout.write(objects.map((o) => stringify(o, { lineWidth: 0 })).join("---\n"));
  }
} catch (error) {
  if (!(error instanceof RenderError)) throw error;
  console.error(`ERROR ${error.message}`);
  process.exit(1);
}
