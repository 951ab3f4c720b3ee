// Driven by tests/e2e/test_typescript_client.py, which restarts the server at WATCHED between the
// lines it reads and writes here: a watch on that server resumes after its last position, and a
// write sent while it is down is retried with the same request id until it lands, once.
import { createInterface } from "node:readline";
import { Kind, MemoryClient, type ChangeEvent } from "../src/index.js";

const key = process.env.MEMPLANE_API_KEY!;
const watched = new MemoryClient(process.env.WATCHED!, { apiKey: key, retry: { budgetMs: 120_000 },
                                                          defaultTimeoutMs: 120_000 });
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const events: ChangeEvent[] = [];
let wanted = 0;
let arrived: () => void = () => {};

async function watchAll(): Promise<void> {
  for await (const event of watched.watch()) {
    events.push(event);
    if (events.length >= wanted) arrived();
  }
}

function seen(count: number): Promise<void> {
  wanted = count;
  return events.length >= count ? Promise.resolve() : new Promise((resolve) => { arrived = resolve; });
}

watchAll().catch((error) => { console.error(error); process.exit(1); });
await new Promise((resolve) => setTimeout(resolve, 1000));  // the stream is open
console.log("watching");
await lines.next();  // "written": three memories written elsewhere
await seen(3);
console.log("seen");
await lines.next();  // "down": the watched server is stopped, three more written elsewhere
const requestId = crypto.randomUUID();
const input = { requestId, memories: [{ content: "written across a restart", kind: Kind.EVENT }] };
const first = watched.write(input);
console.log("writing");
const written = await first;  // it lands once the server is back
const again = await watched.write(input);
await seen(7);
console.log(JSON.stringify({
  first: written.memories[0].id, again: again.memories[0].id,
  events: events.map((e) => ({ position: e.position.toString(), content: e.memory?.content ?? "" })),
}));
process.exit(0);  // the watch is open for good: done with it
