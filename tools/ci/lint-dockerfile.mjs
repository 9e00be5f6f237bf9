// Lints Dockerfiles with dockerfile-utils (the language service behind editor Dockerfile support).
//   node tools/ci/lint-dockerfile.mjs Dockerfile [...]
// Every diagnostic (error or warning) is printed as file:line:col and fails the check.
import { readFileSync } from "node:fs";
import { validate } from "dockerfile-utils";

const SEVERITY = { 1: "error", 2: "warning", 3: "info", 4: "hint" };
let problems = 0;
for (const file of process.argv.slice(2)) {
  const diagnostics = validate(readFileSync(file, "utf8"), {});
  for (const d of diagnostics) {
    const { line, character } = d.range.start;
    console.error(`${file}:${line + 1}:${character + 1}: ${SEVERITY[d.severity] ?? d.severity}: ${d.message}`);
    problems++;
  }
  console.log(`${file}: ${diagnostics.length} problem(s)`);
}
process.exit(problems > 0 ? 1 : 0);
