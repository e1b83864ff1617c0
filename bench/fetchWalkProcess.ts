// The CLI's V8 flags, first, as in every `sync` process.
import '../src/v8Flags.js';
import { timedWalk } from './fetchWalk.js';
import { benchApi } from './harness.js';

/**
 * One fetch-only walk of the sandbox's feed in a process of its own, begun as soon as the client's
 * modules are loaded: as cold as a `sync reviews` process is when its run begins, which the walk
 * the benchmark runs in its own process (warmed by a first one) is not. Run by bench/backfill.ts
 * with SANDBOX_URL, SANDBOX_API_KEY and FEED_SIZE; prints the walk's seconds and CPU as JSON.
 */
const api = benchApi({ url: process.env.SANDBOX_URL!, apiKey: process.env.SANDBOX_API_KEY! });
try {
  process.stdout.write(`${JSON.stringify(await timedWalk(api, Number(process.env.FEED_SIZE)))}\n`);
} finally {
  await api.close();
}
