#!/usr/bin/env bash
# Chart checks, offline: helm lint --strict and helm template for each scenario in
# helm/gpupool/ci/*-values.yaml (plus the defaults), every rendered manifest validated against the
# Kubernetes schemas (KServe kinds against tools/ci/schemas/), the alert rules through promtool
# (syntax and the unit tests of tools/ci/alert-rules-test.yaml), values that values.schema.json must
# reject, and the chart's copy of config/.
# Needs tools/ci/install-tools.sh to have run (helm and promtool in tools/ci/.bin, node_modules).
set -euo pipefail
cd "$(dirname "$0")/../.."
helm=tools/ci/.bin/helm
chart=helm/gpupool
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

tools/sync-helm-config.sh --check

scenarios=(default)
for f in "$chart"/ci/*-values.yaml; do
  name=$(basename "$f" -values.yaml)
  [ "$name" = bad ] || scenarios+=("$name")
done

for name in "${scenarios[@]}"; do
  args=()
  [ "$name" = default ] || args=(-f "$chart/ci/$name-values.yaml")
  echo "== $name: helm lint --strict"
  "$helm" lint --strict "$chart" "${args[@]}"
  echo "== $name: helm template"
  "$helm" template gpupool "$chart" --namespace inference "${args[@]}" >"$out/$name.yaml"
  grep -c '^kind:' "$out/$name.yaml" | xargs -I{} echo "rendered {} objects"
done

echo "== schema validation of the rendered manifests"
node tools/ci/validate-manifests.mjs "$out"/*.yaml

echo "== alert rules: promtool check rules, promtool test rules"
"$helm" template gpupool "$chart" --set prometheusRule.enabled=true --show-only templates/prometheusrule.yaml \
  >"$out/prometheusrule.yaml"
# The PrometheusRule's spec is a Prometheus rule file; the unit tests get it without the annotations
# (static text, which check rules covers on the full file).
spec_of() {
  (cd tools/ci && node --input-type=module -e '
    import { parse, stringify } from "yaml";
    import { readFileSync } from "node:fs";
    const spec = parse(readFileSync(0, "utf8")).spec;
    if (process.argv[1] === "without-annotations") for (const g of spec.groups) for (const r of g.rules) delete r.annotations;
    process.stdout.write(stringify(spec));' "$@") <"$out/prometheusrule.yaml"
}
mkdir -p "$out/rules-full" "$out/rules-test"
spec_of >"$out/rules-full/gpupool-rules.yaml"
spec_of without-annotations >"$out/rules-test/gpupool-rules.yaml"
tools/ci/.bin/promtool check rules "$out/rules-full/gpupool-rules.yaml"
cp tools/ci/alert-rules-test.yaml "$out/rules-test/"
tools/ci/.bin/promtool test rules "$out/rules-test/alert-rules-test.yaml"

echo "== values.schema.json rejects bad values"
if "$helm" template gpupool "$chart" -f "$chart/ci/bad-values.yaml" >"$out/bad.log" 2>&1; then
  echo "helm template accepted $chart/ci/bad-values.yaml: values.schema.json is not enforcing" >&2
  exit 1
fi
for expected in unknownKey count port; do
  grep -q "$expected" "$out/bad.log" || { echo "schema error for '$expected' missing:" >&2; cat "$out/bad.log" >&2; exit 1; }
done
echo "rejected as expected: $(grep -c . "$out/bad.log") error line(s)"

echo "== HPA refuses maxReplicas < minReplicas"
if "$helm" template gpupool "$chart" --set autoscaling.enabled=true --set autoscaling.minReplicas=3 \
     --set autoscaling.maxReplicas=2 >"$out/hpa.log" 2>&1; then
  echo "maxReplicas < minReplicas was accepted" >&2
  exit 1
fi
grep -q 'must be >= autoscaling.minReplicas' "$out/hpa.log"
echo "helm checks passed"
