// The TypeScript client against a real `memplane serve` (tests/e2e/test_typescript_client.py
// starts it and passes MEMPLANE_ADDRESS, MEMPLANE_API_KEY and MEMPLANE_OTHER_API_KEY, a key of
// another tenant).
import assert from "node:assert/strict";
import { after, test } from "node:test";
import {
  InvalidArgumentError, Kind, MemoryClient, NotFoundError, ReflectMode, TaskOutcome, UnauthenticatedError,
  WriteOutcome,
} from "../src/index.js";

const address = process.env.MEMPLANE_ADDRESS!;
const client = new MemoryClient(address, { apiKey: process.env.MEMPLANE_API_KEY! });
const other = new MemoryClient([address], { apiKey: process.env.MEMPLANE_OTHER_API_KEY! });
after(() => { client.close(); other.close(); });

test("a written memory is found by search, with typed results", async () => {
  const written = await client.write({ memories: [
    { content: "The user lives in Lisbon", kind: Kind.FACT, entity: "user", attribute: "city", value: "Lisbon" },
  ] });
  assert.equal(written.results[0].outcome, WriteOutcome.CREATED);
  const { hits } = await client.search({ query: "where does the user live?", topK: 3, explain: true });
  assert.equal(hits[0].memory?.id, written.memories[0].id);
  assert.ok(hits[0].explanation?.components.length);
});

test("a write repeated with its request id is applied once", async () => {
  const requestId = crypto.randomUUID();
  const first = await client.write({ requestId, memories: [{ content: "Deploys need the VPN on", kind: Kind.LESSON }] });
  const again = await client.write({ requestId, memories: [{ content: "Deploys need the VPN on", kind: Kind.LESSON }] });
  assert.equal(again.memories[0].id, first.memories[0].id);
  const all = [];
  for await (const memory of client.iterMemories({ filter: { kinds: [Kind.LESSON] } })) all.push(memory);
  assert.equal(all.filter((m) => m.content === "Deploys need the VPN on").length, 1);
});

test("reflect stores a summary of a finished task", async () => {
  const result = await client.reflect({
    mode: ReflectMode.SYNC,
    input: { case: "task", value: { taskId: "ts-1", request: "Book a table for four", outcome: TaskOutcome.SUCCESS,
                                     steps: [{ action: "book_table 4 people 19:00", observation: "booked" }] } },
  });
  assert.ok(result.result?.summary);
  assert.ok(result.result?.memories.length);
});

test("forget by id, hard, removes the memory", async () => {
  const { memories: [memory] } = await client.write({ memories: [{ content: "Temporary note", kind: Kind.EVENT }] });
  const forgotten = await client.forget({ target: { case: "ids", value: { ids: [memory.id] } }, hard: true });
  assert.equal(forgotten.forgottenCount, 1n);
  await assert.rejects(client.getMemory({ id: memory.id }), NotFoundError);
});

test("writeOne stores one memory and eraseUser counts a user's memories on a dry run", async () => {
  const userId = `ts-user-${crypto.randomUUID()}`;
  const memory = await client.writeOne({ content: "The user likes green tea", kind: Kind.PREFERENCE, userId });
  assert.equal((await client.getMemory({ id: memory.id })).memory?.content, "The user likes green tea");
  const counted = await client.eraseUser(userId, { dryRun: true });
  assert.equal(counted.receipt?.dryRun, true);
  assert.equal(counted.forgottenCount, 1n);
  assert.equal((await client.getMemory({ id: memory.id })).memory?.id, memory.id);
});

test("bad input is a typed error carrying the server's reason", async () => {
  const error = await client.write({ memories: [{ content: "", kind: Kind.FACT }] }).catch((e) => e);
  assert.ok(error instanceof InvalidArgumentError, String(error));
  assert.equal(error.code, "INVALID_ARGUMENT");
  assert.match(error.reason, /^[A-Z_]+$/);
});

test("a wrong key is UNAUTHENTICATED with its reason", async () => {
  const stranger = new MemoryClient(address, { apiKey: "mpk_wrong_0000000000000000", retry: { maxAttempts: 1 } });
  try {
    const error = await stranger.getStats({}).catch((e) => e);
    assert.ok(error instanceof UnauthenticatedError);
    assert.equal(error.reason, "INVALID_API_KEY");
  } finally {
    stranger.close();
  }
});

test("another tenant can neither find nor read a memory", async () => {
  const secret = `Our launch code word is heliotrope-${crypto.randomUUID()}`;
  const { memories: [memory] } = await client.write({ memories: [{ content: secret, kind: Kind.FACT }] });
  const { hits } = await other.search({ query: secret, topK: 10 });
  assert.ok(hits.every((hit) => hit.memory?.id !== memory.id && hit.memory?.content !== secret));
  await assert.rejects(other.getMemory({ id: memory.id }), NotFoundError);
  const forgotten = await other.forget({ target: { case: "ids", value: { ids: [memory.id] } } }).catch((e) => e);
  assert.ok(forgotten instanceof Error || forgotten.forgottenCount === 0n);
  assert.equal((await client.getMemory({ id: memory.id })).memory?.content, secret);
});

test("a deadline shorter than the call ends it with DEADLINE_EXCEEDED", async () => {
  const error = await client.search({ query: "anything" }, { timeoutMs: 1 }).catch((e) => e);
  assert.equal(error.code, "DEADLINE_EXCEEDED");
});
