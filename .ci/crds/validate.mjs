// Validates every KEDA and Prometheus Operator object in the YAML files named on
// the command line against its CRD's schema, with the models of
// @kubernetes-models/keda and @kubernetes-models/prometheus-operator. The core
// kinds are kubernetes-validate's (.ci/validate-kubernetes); a kind that neither
// knows fails here, so that no object goes unchecked. With --core-only, any object
// that is not a core kind fails: what a cluster without those CRDs could not apply.
// Exit 1 if any file has a problem.
//
//   node .ci/crds/validate.mjs [--core-only] FILE.yaml...
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { ScaledObject, TriggerAuthentication } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { PodMonitor, PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const models = {
  "keda.sh/v1alpha1 ScaledObject": ScaledObject,
  "keda.sh/v1alpha1 TriggerAuthentication": TriggerAuthentication,
  "monitoring.coreos.com/v1 PodMonitor": PodMonitor,
  "monitoring.coreos.com/v1 PrometheusRule": PrometheusRule,
};
// What kubernetes-validate checks.
const core = new Set([
  "v1 ConfigMap",
  "v1 Secret",
  "v1 Service",
  "apps/v1 Deployment",
  "policy/v1 PodDisruptionBudget",
]);

const args = process.argv.slice(2);
const coreOnly = args[0] === "--core-only";
const files = coreOnly ? args.slice(1) : args;
let failed = false;
let objects = 0;
for (const file of files) {
  for (const document of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (document.errors.length > 0) {
      console.error(`ERROR ${file}: not YAML: ${document.errors[0].message}`);
      failed = true;
      continue;
    }
    const object = document.toJS();
    if (object === null) continue;
    const kind = `${object.apiVersion} ${object.kind}`;
    const name = `${object.kind}/${object.metadata?.name}`;
    objects += 1;
    if (core.has(kind)) continue;
    if (coreOnly) {
      console.error(`ERROR ${file}: ${name}: ${kind} is not a core kind; a cluster without its CRD refuses it`);
      failed = true;
      continue;
    }
    const Model = models[kind];
    if (!Model) {
      console.error(`ERROR ${file}: ${name}: no schema here for ${kind}`);
      failed = true;
      continue;
    }
    try {
      new Model(object).validate();
      console.log(`INFO ${file}: ${name} passed against the ${object.apiVersion} CRD schema`);
    } catch (error) {
      console.error(`ERROR ${file}: ${name}: ${error.message}`);
      failed = true;
    }
  }
}
if (objects === 0) {
  console.error(`ERROR ${files.join(" ")}: no object at all`);
  failed = true;
} else if (coreOnly && !failed) {
  console.log(`INFO ${files.join(" ")}: ${objects} objects, every one a core kind`);
}
process.exit(failed ? 1 : 0);
