import { randomBytes } from 'node:crypto';
import { type Db, openDb } from '../src/db/connect.js';
import { migrate } from '../src/db/migrate.js';
import { JOB } from '../src/jobs/jobNames.js';
import { runJob } from '../src/jobs/runner.js';
import { makeLogger, SecretScrubber } from '../src/log.js';
import { syncReviews } from '../src/pull/syncReviews.js';
import { startSandbox } from '../src/sandbox/server.js';
import { type BenchResult, benchApi, medianSeconds } from './harness.js';

const REVIEWS = 20_000;
const PAGE_SIZE = 100;

/**
 * The pull path's overhead over the network alone: baseline = fetching (and validating) every
 * page of a 20,000-review sandbox feed and discarding it; subject = a full `sync reviews` of the
 * same feed into a fresh schema (upsert per page, checkpoint per page, write overlapped with the
 * next fetch). Real PostgreSQL when BENCH_DATABASE_URL is set, else in-memory PGlite.
 */
export async function benchPull(): Promise<BenchResult> {
  const databaseUrl = process.env.BENCH_DATABASE_URL || undefined;
  const log = makeLogger({ level: 'silent', scrubber: new SecretScrubber() });
  const sandbox = await startSandbox({ port: 0, seedReviews: REVIEWS, seed: 1 });
  const api = benchApi(sandbox, PAGE_SIZE);
  try {
    let fetched = 0;
    const baseline = await medianSeconds(async () => {
      fetched = 0;
      for await (const page of api.reviews.pages(null, null)) fetched += page.items.length;
    });
    if (fetched !== REVIEWS) throw new Error(`baseline fetched ${fetched} reviews, expected ${REVIEWS}`);

    const times: number[] = [];
    let backend = '';
    for (let run = 0; run < 4; run++) {
      const schema = `bench_pull_${randomBytes(4).toString('hex')}`;
      const db: Db = await openDb({ url: databaseUrl, schema, poolMax: 4, dataDir: undefined });
      backend = db.backend;
      try {
        await migrate(db);
        const ctx = { db, api, log, overlapMs: 600_000, detailConcurrency: 4 };
        const start = process.hrtime.bigint();
        const result = await runJob(
          { db: db, log: log },
          { name: JOB.reviews, run: (c, s) => syncReviews(ctx, c, s) },
          { wait: true },
        );
        const seconds = Number(process.hrtime.bigint() - start) / 1e9;
        if (result.counts.inserted !== REVIEWS) throw new Error(`sync inserted ${result.counts.inserted}`);
        if (run > 0) times.push(seconds); // the first run warms up
      } finally {
        if (db.backend === 'postgres') await db.knex.raw('drop schema if exists ?? cascade', [schema]);
        await db.close();
      }
    }
    times.sort((a, b) => a - b);
    const subject = times[Math.floor(times.length / 2)]!;
    return {
      name: 'pull: full review sync',
      baseline: { label: `fetch ${REVIEWS} reviews, discard`, seconds: baseline },
      subject: { label: `sync reviews into ${backend}`, seconds: subject },
      ratio: subject / baseline,
      details: {
        reviews: REVIEWS,
        page_size: PAGE_SIZE,
        backend,
        reviews_per_second: Math.round(REVIEWS / subject),
      },
    };
  } finally {
    await api.close();
    await sandbox.close();
  }
}
