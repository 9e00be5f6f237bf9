// Validates rendered Kubernetes manifests offline against the API schemas of kubernetes-models
// (and the prometheus-operator models for ServiceMonitor).
//   node tools/ci/validate-manifests.mjs rendered.yaml [...]
// Every document must be of a known apiVersion/kind and pass validate(); the exit code is the
// number of invalid documents (capped at 1), and each problem is printed with its file and object.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const KNOWN = {
  "v1/ConfigMap": "kubernetes-models/v1/ConfigMap",
  "v1/Secret": "kubernetes-models/v1/Secret",
  "v1/Service": "kubernetes-models/v1/Service",
  "v1/ServiceAccount": "kubernetes-models/v1/ServiceAccount",
  "v1/Pod": "kubernetes-models/v1/Pod",
  "apps/v1/Deployment": "kubernetes-models/apps/v1/Deployment",
  "autoscaling/v2/HorizontalPodAutoscaler": "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler",
  "policy/v1/PodDisruptionBudget": "kubernetes-models/policy/v1/PodDisruptionBudget",
  "monitoring.coreos.com/v1/ServiceMonitor": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor",
};

let failures = 0;
let checked = 0;
for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      console.error(`${file}: YAML error: ${doc.errors[0].message}`);
      failures++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null || obj === undefined) continue;
    const id = `${obj.apiVersion}/${obj.kind}`;
    const where = `${file}: ${obj.kind} ${obj.metadata?.name ?? "(no name)"}`;
    const modulePath = KNOWN[id];
    if (!modulePath) {
      console.error(`${where}: no schema for ${id}`);
      failures++;
      continue;
    }
    const mod = await import(modulePath);
    const Model = mod[obj.kind];
    try {
      new Model(obj).validate();
      checked++;
    } catch (e) {
      console.error(`${where}: ${e.message}`);
      failures++;
    }
  }
}
console.log(`validated ${checked} manifests against the Kubernetes schemas, ${failures} invalid`);
process.exit(failures > 0 ? 1 : 0);
