// Validates the Prometheus Operator objects in deploy/monitoring/ (ServiceMonitor,
// PrometheusRule) against the schemas generated from the operator's own CRDs
// (@kubernetes-models/prometheus-operator, from npm): types, required fields, enums and
// patterns such as durations. Like the CRDs themselves, the schemas allow fields they do
// not define (the API server prunes them).
//
//   node tests/deploy/validate_monitoring.mjs MODULES_DIR FILE...
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modules, ...files] = process.argv.slice(2);
const load = (name) => import(pathToFileURL(path.resolve(modules, name)).href);
const yaml = (await load("js-yaml/dist/js-yaml.mjs")).default;
const v1 = "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
const kinds = {
  ServiceMonitor: (await load(`${v1}/ServiceMonitor.js`)).ServiceMonitor,
  PrometheusRule: (await load(`${v1}/PrometheusRule.js`)).PrometheusRule,
};

let failed = false;
let checked = 0;
for (const file of files) {
  for (const doc of yaml.loadAll(fs.readFileSync(file, "utf8"))) {
    if (!doc || doc.apiVersion !== "monitoring.coreos.com/v1") continue;
    const Model = kinds[doc.kind];
    if (!Model) {
      console.error(`ERROR ${file}: ${doc.kind} is not a kind this check knows`);
      failed = true;
      continue;
    }
    try {
      new Model(doc).validate();
      checked += 1;
    } catch (error) {
      console.error(`ERROR ${file}: ${doc.kind} ${doc.metadata.name}: ${error.message}`);
      failed = true;
    }
  }
}
if (!failed) console.log(`INFO ${checked} Prometheus Operator objects match the operator's CRD schemas`);
process.exit(failed ? 1 : 0);
