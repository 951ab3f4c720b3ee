// Quickstart in TypeScript: write a fact, a preference and a lesson, then search them with
// explanations. Run it against `make serve` with the tenant admin key printed at its first start:
//
//   cd clients/typescript && npm run build
//   MEMPLANE_API_KEY=mpk_... node dist/examples/quickstart.js
//
// MEMPLANE_ADDRESS (default 127.0.0.1:50051) picks another server.
import { Kind, MemoryClient, MemplaneError } from "../src/index.js";

const apiKey = process.env.MEMPLANE_API_KEY;
if (!apiKey) {
  console.error("set MEMPLANE_API_KEY to a key of your tenant (make serve prints a tenant admin key at first start)");
  process.exit(1);
}
const client = new MemoryClient(process.env.MEMPLANE_ADDRESS ?? "127.0.0.1:50051", { apiKey });

try {
  const { memories } = await client.write({ memories: [
    { content: "The user lives in Shanghai", kind: Kind.FACT, entity: "user", attribute: "city", value: "Shanghai" },
    { content: "The user prefers answers in bullet points", kind: Kind.PREFERENCE },
    { content: "Deploys to staging need the VPN switched on", kind: Kind.LESSON, context: "deploying" },
  ] });
  for (const memory of memories) console.log(`wrote ${Kind[memory.kind].toLowerCase().padEnd(10)} ${memory.id}  ${memory.content}`);

  for (const query of ["where does the user live?", "what do I need before deploying?"]) {
    console.log(`\nsearch: ${query}`);
    const { hits } = await client.search({ query, topK: 3, explain: true });
    for (const hit of hits) {
      // Ranked components are the retrieval channels that found the hit; the rest are score factors.
      const channels = hit.explanation?.components.filter((c) => c.rank).map((c) => c.name).join(", ");
      console.log(`  ${hit.score.toFixed(3)}  ${hit.memory?.content}  (found by: ${channels})`);
    }
  }
} catch (error) {
  // The server's code and stable reason, e.g. UNAUTHENTICATED [INVALID_API_KEY].
  console.error(`memplane call failed: ${error instanceof MemplaneError ? error.message : error}`);
  process.exitCode = 1;
} finally {
  client.close();
}
