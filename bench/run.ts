import { cpus } from 'node:os';
import { benchContactsDiff, benchContactsSend } from './contacts.js';
import { type BenchResult, formatResults } from './harness.js';
import { benchOutbox } from './outbox.js';
import { benchPull } from './pull.js';
import { benchWebhook } from './webhook.js';

/**
 * `npm run bench`: every benchmark against the in-process sandbox, on the embedded database, or
 * on the PostgreSQL server named by BENCH_DATABASE_URL. Prints a Markdown table for
 * docs/benchmarks.md: ratios to a baseline measured in the same run, never bare timings.
 */
const benches: Array<() => Promise<BenchResult>> = [
  benchPull,
  benchWebhook,
  benchContactsDiff,
  benchContactsSend,
  benchOutbox,
];
const results: BenchResult[] = [];
for (const bench of benches) {
  results.push(await bench());
}
const database = process.env.BENCH_DATABASE_URL
  ? 'PostgreSQL server (BENCH_DATABASE_URL)'
  : 'embedded PGlite';
process.stdout.write(
  `Node ${process.version}, ${cpus().length} cores, ${database}, ${new Date().toISOString().slice(0, 10)}\n\n`,
);
process.stdout.write(`${formatResults(results)}\n`);
