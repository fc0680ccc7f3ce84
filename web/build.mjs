// Builds the web client into src/outlast/web/static/ (shipped inside the Python package).
//
//   npm ci --prefix web && npm run --prefix web build
//
// Output: index.html, app.js (the page's own code, not minified, so it stays
// readable), vendor.js (@ag-ui/client with rxjs and zod, minified) and app.css.
// `--watch` rebuilds on change.
import * as esbuild from "esbuild";
import { copyFile, mkdir, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = join(here, "..", "src", "outlast", "web", "static");
const watch = process.argv.includes("--watch");

// The page speaks SSE only. @ag-ui/client also bundles a protobuf transport
// (~190 KB); this stub keeps the one constant the SSE path reads and makes the
// binary path fail loudly if a server ever answers with it.
const noProtobuf = {
  name: "no-protobuf",
  setup(build) {
    build.onResolve({ filter: /^@ag-ui\/proto$/ }, () => ({ path: "proto", namespace: "stub" }));
    build.onLoad({ filter: /.*/, namespace: "stub" }, () => ({
      contents: `export const AGUI_MEDIA_TYPE = "application/vnd.ag-ui.event+proto";
        export function decode() { throw new Error("protobuf AG-UI streams are not supported by this client"); }`,
      loader: "js",
    }));
  },
};

// The app imports the library from ./vendor.js at run time, so app.js holds only our code
// (ResumableHttpAgent included: it comes from ../clients/js/src as source, and its
// own imports of @ag-ui/client and rxjs land here too).
export const vendorExternal = {
  name: "vendor-external",
  setup(build) {
    build.onResolve({ filter: /^(@ag-ui\/client|rxjs)$/ }, () => ({ path: "./vendor.js", external: true }));
  },
};

const common = { bundle: true, format: "esm", target: "es2022", legalComments: "none", logLevel: "info" };

export const builds = [
  {
    ...common,
    stdin: {
      contents: `export * from "@ag-ui/client"; export { Observable } from "rxjs";`,
      resolveDir: here,
      sourcefile: "vendor.js",
    },
    outfile: join(outdir, "vendor.js"),
    minify: true,
    plugins: [noProtobuf],
  },
  { ...common, entryPoints: [join(here, "src", "app.ts")], outfile: join(outdir, "app.js"), plugins: [vendorExternal] },
  { ...common, entryPoints: [join(here, "src", "styles.css")], outfile: join(outdir, "app.css") },
];

// Imported by the tests for its configuration; run as a script, it builds.
const isMain = import.meta.url === pathToFileURL(process.argv[1] ?? "").href;

if (isMain) {
  await mkdir(outdir, { recursive: true });
  for (const name of await readdir(outdir)) {
    if (/\.(js|css|html|map)$/.test(name)) await rm(join(outdir, name));
  }
  await copyFile(join(here, "index.html"), join(outdir, "index.html"));

  if (watch) {
    for (const options of builds) await (await esbuild.context(options)).watch();
  } else {
    await Promise.all(builds.map((options) => esbuild.build(options)));
  }
}
