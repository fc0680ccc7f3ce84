// Runs one AG-UI request with the stock @ag-ui/client HttpAgent against a live URL and
// prints what the client folded: {"messages", "state", "error"}.
//
// Input (JSON on stdin): {"url", "headers"?, "threadId", "runId", "messages", "forwardedProps"?}
import { HttpAgent } from "@ag-ui/client";

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
console.warn = (...args) => process.stderr.write(`${args.join(" ")}\n`);

let raw = "";
for await (const chunk of process.stdin) raw += chunk;
const input = JSON.parse(raw);
const agent = new HttpAgent({ url: input.url, headers: input.headers ?? {}, threadId: input.threadId });
agent.setMessages(input.messages ?? []);
let error = null;
try {
  await agent.runAgent({ runId: input.runId, forwardedProps: input.forwardedProps ?? {} });
} catch (e) {
  error = String(e?.message ?? e);
}
process.stdout.write(JSON.stringify({ messages: agent.messages, state: agent.state, error }));
