import { randomBytes } from 'node:crypto';
import { type Db, openDb } from '../src/db/connect.js';
import { migrate } from '../src/db/migrate.js';
import { parseEvent } from '../src/webhooks/event.js';
import { type Delivery, storeDeliveries } from '../src/webhooks/inboxSql.js';
import { postgresCpuSeconds } from './cpuAccount.js';
import type { BenchOptions, BenchResult } from './harness.js';
import { delivery as signedDelivery } from './webhook.js';

/** Deliveries per commit: what the inbox commits at a steady 1,000/s (docs/benchmarks.md). */
const BATCH = 8;

/** `count` verified deliveries of new reviews, as the receiver hands them to the inbox. */
function deliveries(count: number): Delivery[] {
  return Array.from({ length: count }, (_, i) => {
    const { body } = signedDelivery(i);
    const parsed = parseEvent(Buffer.from(body));
    if (!parsed.ok) throw new Error(parsed.detail);
    return { event: parsed.event, body, observedAt: new Date() };
  });
}

interface Pass {
  readonly seconds: number;
  readonly postgresCpu: number;
}

/** `commits` inbox commits of BATCH new deliveries each, one after the other. */
async function commitAll(db: Db, commits: number): Promise<Pass> {
  const batches = Array.from({ length: commits }, () => deliveries(BATCH));
  const cpuBefore = postgresCpuSeconds() ?? Number.NaN;
  const start = process.hrtime.bigint();
  for (const batch of batches) await storeDeliveries(db.knex, db, batch);
  return {
    seconds: Number(process.hrtime.bigint() - start) / 1e9,
    postgresCpu: (postgresCpuSeconds() ?? Number.NaN) - cpuBefore,
  };
}

/**
 * The webhook inbox's commit, the statement that runs for every few deliveries, prepared once per
 * connection (the default on a PostgreSQL server reached directly) against the same statement
 * unnamed, parsed and planned on every call (as behind a transaction pooler, DB_POOLER=transaction),
 * in alternating passes on one schema. PostgreSQL server only.
 */
export async function benchStatements(options: BenchOptions): Promise<BenchResult[]> {
  if (options.databaseUrl === undefined) return [];
  const commits = options.quick ? 100 : 3_000;
  const schema = `bench_statements_${randomBytes(4).toString('hex')}`;
  const open = (pooler: 'none' | 'transaction') =>
    openDb({ url: options.databaseUrl, schema, poolMax: 1, dataDir: undefined, pooler });
  const named = await open('none');
  const unnamed = await open('transaction');
  try {
    await migrate(named);
    await commitAll(named, Math.min(commits, 200)); // warm-up: connections, caches, JIT
    await commitAll(unnamed, Math.min(commits, 200));
    const passes = { named: [] as Pass[], unnamed: [] as Pass[] };
    for (let round = 0; round < 2; round++) {
      passes.unnamed.push(await commitAll(unnamed, commits));
      passes.named.push(await commitAll(named, commits));
    }
    const best = (list: Pass[]) => list.reduce((a, b) => (b.seconds < a.seconds ? b : a));
    const a = best(passes.unnamed);
    const b = best(passes.named);
    const perDeliveryUs = (pass: Pass) => (pass.postgresCpu / (commits * BATCH)) * 1e6;
    return [
      {
        name: `webhook inbox commit of ${BATCH} deliveries, ${commits.toLocaleString('en')} in a row`,
        baseline: { label: 'the statement unnamed (as behind a transaction pooler)', seconds: a.seconds },
        subject: { label: 'prepared once per connection (the default)', seconds: b.seconds },
        ratio: b.seconds / a.seconds,
        details: {
          commit_ms: (b.seconds / commits) * 1000,
          unnamed_commit_ms: (a.seconds / commits) * 1000,
          postgres_cpu_us_per_delivery: perDeliveryUs(b),
          unnamed_postgres_cpu_us_per_delivery: perDeliveryUs(a),
        },
      },
    ];
  } finally {
    await named.knex.raw('drop schema if exists ?? cascade', [schema]);
    await named.close();
    await unnamed.close();
  }
}
