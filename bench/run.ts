import { writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { benchBackfill } from './backfill.js';
import { benchContactsDiff, benchContactsSend } from './contacts.js';
import { type BenchOptions, type BenchResult, formatResults } from './harness.js';
import { benchOutbox } from './outbox.js';
import { benchStatements } from './statements.js';
import { benchWebhook } from './webhook.js';

/**
 * `npm run bench [-- --quick] [--only backfill,webhook] [--json FILE]`: every benchmark against the
 * sandbox, on the PostgreSQL server named by BENCH_DATABASE_URL or else the embedded database.
 * Prints a Markdown table for docs/benchmarks.md (ratios to a baseline measured in the same run,
 * never bare timings) and writes every figure to a JSON file.
 */
const BENCHES: Record<string, (options: BenchOptions) => Promise<BenchResult[]>> = {
  backfill: benchBackfill,
  webhook: benchWebhook,
  statements: benchStatements,
  'contacts-diff': benchContactsDiff,
  'contacts-send': benchContactsSend,
  outbox: benchOutbox,
};

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    json: { type: 'string', default: 'bench-results.json' },
  },
});
const names = values.only?.split(',') ?? Object.keys(BENCHES);
const unknown = names.filter((name) => !(name in BENCHES));
if (unknown.length > 0) {
  throw new Error(`unknown benchmark ${unknown.join(', ')}: choose from ${Object.keys(BENCHES).join(', ')}`);
}
const options: BenchOptions = {
  quick: values.quick,
  databaseUrl: process.env.BENCH_DATABASE_URL || undefined,
  imageNode: process.env.BENCH_IMAGE_NODE || undefined,
};

const results: BenchResult[] = [];
for (const name of names) {
  const started = Date.now();
  const rows = await BENCHES[name]!(options);
  results.push(...rows);
  process.stderr.write(
    `${name}: ${rows.length} results in ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
  );
}
const machine = {
  date: new Date().toISOString(),
  node: process.version,
  cores: cpus().length,
  database: options.databaseUrl ? 'PostgreSQL server (BENCH_DATABASE_URL)' : 'embedded PGlite',
  quick: options.quick,
};
await writeFile(values.json, `${JSON.stringify({ machine, results }, null, 2)}\n`);
process.stdout.write(
  `${machine.node}, ${machine.cores} cores, ${machine.database}, ${machine.date.slice(0, 10)}${options.quick ? ', --quick' : ''}\n\n`,
);
process.stdout.write(`${formatResults(results)}\n`);
