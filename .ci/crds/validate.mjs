// Validates every KEDA and Prometheus Operator object in the YAML files named on
// the command line against its CRD's schema, with the models of
// @kubernetes-models/keda and @kubernetes-models/prometheus-operator. The core
// kinds are kubernetes-validate's (.ci/run); a kind that neither knows fails here,
// so that no object goes unchecked. Exit 1 on the first file with a problem.
//
//   node .ci/crds/validate.mjs FILE.yaml...
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
const core = new Set(["v1 ConfigMap", "v1 Secret", "v1 Service", "apps/v1 Deployment"]);

let failed = false;
for (const file of process.argv.slice(2)) {
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
    if (core.has(kind)) continue;
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
process.exit(failed ? 1 : 0);
