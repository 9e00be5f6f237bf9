#!/usr/bin/env bash
# Shows that the chart's Grafana dashboard and alert rules read live data from a running server:
# a Prometheus on loopback (Debian's binary, unpacked by tools/ci/install-tools.sh) scrapes the
# server's /actuator/prometheus while the load driver sends inferences (some malformed or abandoned), then
# every dashboard query and every alert expression is evaluated through Prometheus' query API,
# as Grafana and the rule evaluator would.
#
#   ./mvnw spring-boot:run &                     # or any running server; then, once it is ready:
#   tools/monitoring-live-check.sh [OUT_DIR]     # default target/monitoring
#
# Environment: API (default http://127.0.0.1:8080), MANAGEMENT (http://127.0.0.1:8081),
# DURATION of the load (60s), PROM_PORT (19090, loopback only).
# Writes OUT_DIR/monitoring-live-check.json (each query, its series count and first values) and
# OUT_DIR/load.json; exit status 1 when a dashboard query returns no series (except those on the
# meters listed in src/test/resources/monitoring/pending-metrics.txt) or an alert
# expression is rejected. An alert expression that matches series now fires once its "for" has
# passed; on a healthy server none matches.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/monitoring}
api=${API:-http://127.0.0.1:8080}
management=${MANAGEMENT:-http://127.0.0.1:8081}
port=${PROM_PORT:-19090}
bin=tools/ci/.bin
for tool in prometheus helm; do
  [ -x "$bin/$tool" ] || { echo "$bin/$tool missing: run tools/ci/install-tools.sh" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
target=${management#http://}
target=${target%%/*}

cat >"$out/prometheus.yml" <<EOF
global:
  scrape_interval: 5s
scrape_configs:
  - job_name: gpupool
    metrics_path: /actuator/prometheus
    static_configs:
      - targets: ["$target"]
        labels: {namespace: local, pod: "$(hostname)"}
EOF
rm -rf "$out/tsdb"
"$bin/prometheus" --config.file="$out/prometheus.yml" --storage.tsdb.path="$out/tsdb" \
  --web.listen-address="127.0.0.1:$port" >"$out/prometheus.log" 2>&1 &
prometheus_pid=$!
trap 'kill "$prometheus_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do
  curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break
  sleep 0.2
done

echo "== load: ${DURATION:-60s} against $api (Prometheus on 127.0.0.1:$port scrapes $management)"
tools/loaddriver.sh --url "$api" --actuator "$management" --mix bert=1,mlp=1 --malformed 0.05 \
  --cancel 0.05 --duration "${DURATION:-60s}" --out "$out/load.json" --quiet
sleep 11 # two more scrapes after the last request

"$bin/helm" template gpupool helm/gpupool --set prometheusRule.enabled=true \
  --show-only templates/prometheusrule.yaml >"$out/prometheusrule.yaml"
(cd tools/ci && node --input-type=module -e '
  import { parse } from "yaml";
  import { readFileSync } from "node:fs";
  const rules = parse(readFileSync(0, "utf8")).spec.groups.flatMap((g) => g.rules);
  process.stdout.write(JSON.stringify(rules.map((r) => ({ alert: r.alert, expr: r.expr }))));') \
  <"$out/prometheusrule.yaml" >"$out/alerts.json"

python3 - "$port" "$out" <<'EOF'
import json, re, sys, urllib.parse, urllib.request

port, out = sys.argv[1], sys.argv[2]

def query(expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        answer = json.load(urllib.request.urlopen(url))
    except urllib.error.HTTPError as e:
        return None, json.load(e).get("error")
    return answer["data"]["result"], None

def panels(items):
    for p in items:
        yield from panels(p.get("panels", []))
        if p["type"] != "row":
            yield p

# Grafana's "All" for the variables, and a fixed rate interval (4 scrapes).
def as_grafana(expr):
    expr = expr.replace("$__rate_interval", "20s")
    return re.sub(r"\$(namespace|pod|device|model)\b", ".*", expr)

# Meters that panels query before the server has them (see the file's header): no data is expected.
pending = {line.strip() for line in open("src/test/resources/monitoring/pending-metrics.txt")
           if line.strip() and not line.startswith("#")}

report = {"dashboard": [], "alerts": []}
failed = False
dashboard = json.load(open("helm/gpupool/files/grafana/gpupool-dashboard.json"))
for panel in panels(dashboard["panels"]):
    for target in panel["targets"]:
        result, error = query(as_grafana(target["expr"]))
        series = len(result or [])
        waiting = series == 0 and error is None and any(name in target["expr"] for name in pending)
        failed |= series == 0 and not waiting
        status = "ok" if series else "pending" if waiting else "none"
        report["dashboard"].append({"panel": panel["title"], "legend": target["legendFormat"], "series": series,
                                    "status": status, "values": [r["value"][1] for r in (result or [])[:4]],
                                    "error": error})
        print(f"{status:8s} {series:3d} series  {panel['title']} / {target['legendFormat']}")

# The PrometheusRule's rules, as rendered with the default thresholds.
for rule in json.load(open(f"{out}/alerts.json")):
    alert, expr = rule["alert"], rule["expr"]
    result, error = query(expr)
    failed |= error is not None
    report["alerts"].append({"alert": alert, "matching_series": len(result or []), "error": error})
    print(f"{'ok' if error is None else 'rejected':8s} {len(result or []):3d} matching {alert}" + (f": {error}" if error else ""))

with open(f"{out}/monitoring-live-check.json", "w") as f:
    json.dump(report, f, indent=2)
with_data = sum(1 for q in report["dashboard"] if q["series"])
waiting = sum(1 for q in report["dashboard"] if q["status"] == "pending")
print(f"dashboard queries with data: {with_data} of {len(report['dashboard'])} ({waiting} on pending meters); "
      f"alert expressions accepted: {sum(1 for a in report['alerts'] if a['error'] is None)} of {len(report['alerts'])}")
sys.exit(1 if failed else 0)
EOF
