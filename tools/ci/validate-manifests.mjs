// Validates rendered Kubernetes manifests offline against the API schemas of kubernetes-models
// (and the prometheus-operator models for ServiceMonitor, PodMonitor and PrometheusRule). KServe
// publishes no such models: its kinds are checked against our own schemas of the fields the chart sets
// (schemas/*.json), their nested Kubernetes types (containers, volumes, tolerations, affinity)
// against the Kubernetes schemas, and what the chart relies on across fields (below).
//   node tools/ci/validate-manifests.mjs rendered.yaml [...]
// Every document must be of a known apiVersion/kind and pass validate(); the exit code is the
// number of invalid documents (capped at 1), and each problem is printed with its file and object.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import Ajv from "ajv";

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
  "monitoring.coreos.com/v1/PodMonitor": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor",
  "monitoring.coreos.com/v1/PrometheusRule": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule",
};

const ajv = new Ajv({ allErrors: true, strict: true });
const schema = (name) => ajv.compile(JSON.parse(readFileSync(new URL(`schemas/${name}.json`, import.meta.url), "utf8")));
const servingRuntime = schema("serving.kserve.io_v1alpha1_ServingRuntime");
const OWN = {
  "serving.kserve.io/v1alpha1/ServingRuntime": servingRuntime,
  "serving.kserve.io/v1alpha1/ClusterServingRuntime": servingRuntime,
  "serving.kserve.io/v1beta1/InferenceService": schema("serving.kserve.io_v1beta1_InferenceService"),
};

const k8s = async (type) => (await import(`kubernetes-models/v1/${type}`))[type];
const NESTED = {
  containers: await k8s("Container"),
  volumes: await k8s("Volume"),
  tolerations: await k8s("Toleration"),
};
const Affinity = await k8s("Affinity");

/** Problems of a KServe object: our schema, then its nested Kubernetes types. */
function kserveProblems(obj, validate) {
  if (!validate(obj)) {
    return validate.errors.map((e) => `${e.instancePath || "/"} ${e.message}${e.params?.additionalProperty ? `: ${e.params.additionalProperty}` : ""}`);
  }
  const problems = [];
  const spec = obj.spec;
  for (const [field, Model] of Object.entries(NESTED)) {
    (spec[field] ?? []).forEach((item, i) => {
      try { new Model(item).validate(); } catch (e) { problems.push(`spec.${field}[${i}]: ${e.message}`); }
    });
  }
  if (spec.affinity) {
    try { new Affinity(spec.affinity).validate(); } catch (e) { problems.push(`spec.affinity: ${e.message}`); }
  }
  return problems;
}

/**
 * What the chart relies on across fields, per rendered file: the runtime's serving container reads
 * models where KServe puts them and is probed on a port it declares; the InferenceService names a
 * runtime of the same release with its model format and protocol.
 */
function reliedOn(objects) {
  const problems = [];
  const runtimes = new Map();
  for (const obj of objects) {
    if (obj.kind !== "ServingRuntime" && obj.kind !== "ClusterServingRuntime") continue;
    runtimes.set(obj.metadata.name, obj);
    const where = `${obj.kind} ${obj.metadata.name}`;
    const container = obj.spec.containers.find((c) => c.name === "kserve-container");
    const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));
    if (env.GPUPOOL_MODELS_PATH !== "/mnt/models") {
      problems.push(`${where}: kserve-container must read its models from KServe's /mnt/models (GPUPOOL_MODELS_PATH is ${env.GPUPOOL_MODELS_PATH})`);
    }
    const ports = (container.ports ?? []).map((p) => p.containerPort);
    if (ports[0] !== 8080) problems.push(`${where}: KServe routes to the first port, which must be 8080 (the v2 API), not ${ports[0]}`);
    for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
      const port = container[probe]?.httpGet?.port;
      if (port === undefined) problems.push(`${where}: kserve-container has no ${probe} with httpGet`);
      else if (!ports.includes(port)) problems.push(`${where}: ${probe} port ${port} is not a container port (${ports})`);
    }
  }
  for (const obj of objects) {
    if (obj.kind !== "InferenceService") continue;
    const where = `InferenceService ${obj.metadata.name}`;
    const model = obj.spec.predictor.model;
    const runtime = runtimes.get(model.runtime);
    if (!runtime) {
      problems.push(`${where}: runtime ${model.runtime} is not rendered with it`);
      continue;
    }
    if (!runtime.spec.supportedModelFormats.some((f) => f.name === model.modelFormat.name)) {
      problems.push(`${where}: model format ${model.modelFormat.name} is not supported by runtime ${model.runtime}`);
    }
    if (model.protocolVersion && !(runtime.spec.protocolVersions ?? []).includes(model.protocolVersion)) {
      problems.push(`${where}: protocol ${model.protocolVersion} is not one of runtime ${model.runtime}'s`);
    }
  }
  return problems;
}

let failures = 0;
let checked = 0;
for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  const objects = [];
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
    if (OWN[id]) {
      const problems = kserveProblems(obj, OWN[id]);
      problems.forEach((p) => console.error(`${where}: ${p}`));
      if (problems.length > 0) failures++;
      else { checked++; objects.push(obj); }
      continue;
    }
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
  const problems = reliedOn(objects);
  problems.forEach((p) => console.error(`${file}: ${p}`));
  failures += problems.length;
}
console.log(`validated ${checked} manifests against the Kubernetes schemas and our KServe schemas, ${failures} invalid`);
process.exit(failures > 0 ? 1 : 0);
