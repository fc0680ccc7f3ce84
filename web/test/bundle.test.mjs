// The page's bundle: ResumableHttpAgent comes from clients/js as source and is
// bundled into app.js, while @ag-ui/client and rxjs (its imports and the page's)
// stay external, loaded from vendor.js. Run with `npm test --prefix web`.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as esbuild from "esbuild";
import { builds } from "../build.mjs";

test("app.js bundles the client package and imports the library only from vendor.js", async () => {
  const app = builds.find((b) => b.outfile?.endsWith("app.js"));
  assert.ok(app, "build.mjs declares the app.js build");
  const result = await esbuild.build({ ...app, write: false, metafile: true, logLevel: "silent" });
  const inputs = Object.keys(result.metafile.inputs);
  assert.ok(inputs.some((p) => p.endsWith("clients/js/src/resumable-agent.ts")), inputs.join("\n"));
  assert.ok(inputs.some((p) => p.endsWith("clients/js/src/sse.ts")), inputs.join("\n"));
  assert.ok(!inputs.some((p) => p.includes("node_modules")), "no library code inlined into app.js");
  const [output] = result.outputFiles;
  assert.match(output.text, /ResumableHttpAgent = class extends HttpAgent/);
  const imports = [...output.text.matchAll(/^import [^;]*? from "([^"]+)";/gms)].map((m) => m[1]);
  assert.deepEqual([...new Set(imports)], ["./vendor.js"]);
});
