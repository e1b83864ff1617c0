import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { CliProcess, cliEnv } from '../helpers/cli.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { expectExactMirror } from '../helpers/oracle.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';

const LEASE_SECONDS = 3;

// A row lock on the lease, taken by a write before its slow part, held the lease's renewal back
// with it: the run stopped as "not renewed in time" (CI saw it on a loaded machine).
describe('a backfill whose writes wait on the database longer than its lease', () => {
  let sandbox: TestSandbox;
  let db: Db;
  const schema = uniqueSchema('slowwrite');
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 10_000, seed: 21 });
    await sandbox.control.setFaults({
      partner: { delay: 1, delayMs: 30, routes: ['/api/v1/partner/reviews'] },
    });
    db = await openDb({ url: POSTGRES_URL, schema, poolMax: 2, dataDir: undefined });
  });
  afterAll(async () => {
    await sandbox?.close();
    await db?.close();
    await dropSchema(schema, POSTGRES_URL);
  });

  it('keeps its lease and ends with an exact mirror', async () => {
    const sync = new CliProcess(
      ['sync', 'reviews'],
      cliEnv({
        REVIEWS_API_URL: sandbox.url,
        REVIEWS_API_KEY: sandbox.apiKey,
        API_PAGE_SIZE: '100',
        JOB_LEASE_SECONDS: String(LEASE_SECONDS),
        DB_SCHEMA: schema,
        DATABASE_URL: POSTGRES_URL,
      }),
    );
    const pagesServed = async () =>
      (await sandbox.control.requests()).by_route['GET /api/v1/partner/reviews']?.['200'] ?? 0;
    while ((await pagesServed()) < 3) await sleep(5);

    // Another session's lock stalls every write of the walk for longer than the lease.
    let writesWaited = false;
    await db.knex.transaction(async (trx) => {
      await trx.raw('lock table ?? in share mode', [db.table('reviews')]);
      const until = performance.now() + LEASE_SECONDS * 1000 + 500;
      while (performance.now() < until) {
        const { rows } = await db.knex.raw(
          `select 1 from pg_stat_activity
           where application_name = 'review-mirror' and wait_event_type = 'Lock' and datname = current_database()`,
        );
        writesWaited ||= rows.length > 0;
        await sleep(100);
      }
    });
    expect(writesWaited).toBe(true);

    const exit = await sync.exited;
    expect(exit).toMatchObject({ code: 0, signal: null, stderr: '' });
    expect(await expectExactMirror(db, sandbox)).toBe(10_000);
  });
});
