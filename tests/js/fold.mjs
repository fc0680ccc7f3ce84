// Runs AG-UI event streams through the stock @ag-ui/client and prints the result.
//
// Input (JSON, from the file named by argv[2] or from stdin):
//   { "messages": [...], "state": {...}, "runs": [ { "events": [...], "params": {...} }, ... ] }
// Each run is one `agent.runAgent(params)` call on the same agent, so the client's full
// inbound pipeline applies: compatibility boundary, enforceEvents, transformChunks,
// verifyEvents and defaultApplyEvents. A later run sees the messages and state an earlier
// run left, which is how a client that reconnects mid-run behaves.
//
// Output (JSON on stdout):
//   { "messages": [...], "state": ..., "pendingInterrupts": [...], "errors": [null | "..."] }
// `errors[i]` is the message of whatever made run i fail (verification included).
// `{ "scenarios": [input, ...] }` gives `{ "scenarios": [output, ...] }`, one agent each.
import { readFileSync } from "node:fs";
import { AbstractAgent } from "@ag-ui/client";
import { from } from "rxjs";

// Transformation warnings go to stderr anyway; keep them out of the way.
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = (...args) => process.stderr.write(`${args.join(" ")}\n`);
console.error = (...args) => process.stderr.write(`${args.join(" ")}\n`);

class ReplayAgent extends AbstractAgent {
  constructor(config) {
    super(config);
    this.pending = [];
  }

  run() {
    return from(this.pending);
  }
}

async function runScenario(spec) {
  const agent = new ReplayAgent({
    threadId: spec.threadId ?? "thread",
    initialMessages: spec.messages ?? [],
    initialState: spec.state ?? {},
  });
  const errors = [];
  for (const run of spec.runs ?? []) {
    agent.pending = run.events;
    try {
      await agent.runAgent(run.params ?? {});
      errors.push(null);
    } catch (error) {
      errors.push(error instanceof Error ? error.message : String(error));
    }
  }
  return {
    messages: agent.messages,
    state: agent.state,
    pendingInterrupts: agent.pendingInterrupts,
    errors,
  };
}

const source = process.argv[2] ? readFileSync(process.argv[2], "utf8") : readFileSync(0, "utf8");
const spec = JSON.parse(source);
// `{ "scenarios": [spec, ...] }` runs many independent agents in one process.
const result = Array.isArray(spec.scenarios)
  ? { scenarios: await Promise.all(spec.scenarios.map(runScenario)) }
  : await runScenario(spec);
process.stdout.write(JSON.stringify(result));
