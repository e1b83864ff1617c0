import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { runJob } from '../../src/jobs/runner.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { expectExactMirror } from '../helpers/oracle.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { pullContext, testApi } from './helpers.js';

describe('incremental review sync against the sandbox', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 20_000, seed: 7 });
    db = await freshDb();
    api = testApi(sandbox);
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  const sync = async (signal?: AbortSignal): Promise<RunCounts> =>
    (
      await runJob(
        { db: db, log: quietLog },
        { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(db, api), c, s) },
        {
          wait: true,
          signal,
        },
      )
    ).counts;

  it('mirrors a 20,000-review feed exactly: decimals, nulls, unicode, ties', async () => {
    const counts = await sync();
    expect(counts).toMatchObject({ pages: 200, fetched: 20_000, inserted: 20_000 });
    expect(await expectExactMirror(db, sandbox)).toBe(20_000);
    const state = await readCheckpoint(db.knex, db, JOB.reviews);
    expect(state.cursor).toBeNull();
    const newest = (await sandbox.control.visibleReviews(sandbox.companyId))[0]!;
    expect(state.watermark?.toISOString()).toBe(newest.created_at);
    // What the field-by-field check covered, made explicit.
    const table = db.table('reviews');
    const count = async (q: Knex.QueryBuilder) => Number((await q.count({ n: '*' }))[0]!.n);
    expect(await count(db.knex(table).whereRaw('rating <> trunc(rating)'))).toBeGreaterThan(0);
    expect(await count(db.knex(table).whereNull('comment'))).toBeGreaterThan(0);
    expect(await count(db.knex(table).whereNull('reviewer_name'))).toBeGreaterThan(0);
    expect(await count(db.knex(table).where('comment', 'like', '%👍%'))).toBeGreaterThan(0);
    const tied = db.knex(table).select('created_at').groupBy('created_at').havingRaw('count(*) > 1');
    expect(await count(db.knex.from(tied.as('t')))).toBeGreaterThan(0);
    expect(await count(db.knex(table).where({ source: 'feed' }).whereNotNull('feed_seen_at'))).toBe(20_000);
  });

  it('survives a review dated in the future: the watermark stops at the walk start, later reviews still land', async () => {
    const [future] = await sandbox.control.submitReviews(sandbox.companyId, [
      { created_at: '2099-01-01T00:00:00.000Z', comment: 'dated in the future by a platform error' },
    ]);
    const before = Date.now();
    await sync();
    const state = await readCheckpoint(db.knex, db, JOB.reviews);
    expect(state.watermark!.getTime()).toBeLessThanOrEqual(Date.now());
    expect(state.watermark!.getTime()).toBeGreaterThanOrEqual(before - 1_000);
    const [next] = await sandbox.control.submitReviews(sandbox.companyId, [{ comment: 'created after it' }]);
    await sync();
    const ids = await db.knex(db.table('reviews')).whereIn('id', [future!.id, next!.id]).pluck('id');
    expect(ids.sort()).toEqual([future!.id, next!.id].sort());
    expect(await expectExactMirror(db, sandbox)).toBe(20_002);
  });

  it('costs exactly one request when the feed has not changed', async () => {
    const before = (await sandbox.control.requests()).total;
    const counts = await sync();
    expect((await sandbox.control.requests()).total - before).toBe(1);
    expect(counts.pages).toBe(1);
    expect(counts.inserted ?? 0).toBe(0);
  });

  it('picks up new reviews, late ones inside the overlap, and ties on the watermark', async () => {
    const state = await readCheckpoint(db.knex, db, JOB.reviews);
    const watermark = state.watermark!.getTime();
    const at = (ms: number) => new Date(ms).toISOString();
    await sandbox.control.submitReviews(sandbox.companyId, [
      { created_at: at(watermark), comment: 'tie with the watermark', rating: 4.5 },
      {
        created_at: at(watermark - 5 * 60_000),
        comment: 'late: 5 minutes behind the watermark',
        rating: 3.5,
      },
      { created_at: at(watermark + 1), comment: 'ümlaut and 🎉', reviewer_name: null, reviewer_email: null },
      { comment: null, rating: 5.0 },
    ]);
    const counts = await sync();
    expect(counts.inserted).toBe(4);
    await expectExactMirror(db, sandbox);
  });

  describe('walks slowed down by the sandbox (a second company of 3,000 reviews)', () => {
    let company: { company_id: string; api_key: string };
    let companyApi: PartnerApi;
    beforeAll(async () => {
      company = await sandbox.control.createCompany({ name: 'Slow Co' });
      await sandbox.control.seed(company.company_id, 3_000, 11);
      companyApi = testApi({ url: sandbox.url, apiKey: company.api_key });
      await sandbox.control.setFaults({
        partner: { delay: 1, delayMs: 25, routes: ['/api/v1/partner/reviews'] },
      });
    });
    afterAll(async () => {
      await sandbox.control.setFaults({});
      await companyApi?.close();
    });

    const syncInto = (target: Db, signal?: AbortSignal) =>
      runJob(
        { db: target, log: quietLog },
        { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(target, companyApi), c, s) },
        {
          wait: true,
          signal,
        },
      );
    const storedCount = async (target: Db) =>
      Number((await target.knex(target.table('reviews')).count({ n: '*' }))[0]!.n);

    it('never skips reviews created while a walk is under way', async () => {
      const fresh = await freshDb();
      try {
        const walk = syncInto(fresh);
        for (const after of [500, 1_500, 2_500]) {
          await waitFor(async () => (await storedCount(fresh)) >= after);
          await sandbox.control.submitReviews(company.company_id, [
            { comment: `during the walk, after ${after}` },
          ]);
        }
        await walk;
        // The walk itself need not have seen them (they are newer than its first page); the next one must.
        await syncInto(fresh);
        expect(await expectExactMirror(fresh, sandbox, company.company_id)).toBe(3_003);
      } finally {
        await fresh.close();
      }
    });

    it('resumes an interrupted walk from its checkpoint instead of starting over', async () => {
      const fresh = await freshDb();
      try {
        const stop = new AbortController();
        const interrupted = syncInto(fresh, stop.signal);
        await waitFor(async () => (await storedCount(fresh)) >= 1_000);
        stop.abort(new Error('stop'));
        await expect(interrupted).rejects.toThrow('stop');
        const mid = await readCheckpoint(fresh.knex, fresh, JOB.reviews);
        expect(mid.cursor).not.toBeNull();
        expect(mid.watermark).toBeNull();
        // Stopped by its caller (a shutdown), not failing: recorded interrupted, not failed.
        const stopped = await fresh.knex(fresh.table('sync_runs')).where({ job: JOB.reviews }).first();
        expect(stopped).toMatchObject({ outcome: 'interrupted', error: 'stop', error_kind: null });

        const resumed = await syncInto(fresh);
        expect(resumed.counts.resumed).toBe(1);
        expect(resumed.counts.pages).toBeLessThanOrEqual(21);
        expect(await expectExactMirror(fresh, sandbox, company.company_id)).toBeGreaterThanOrEqual(3_000);
        expect((await readCheckpoint(fresh.knex, fresh, JOB.reviews)).cursor).toBeNull();
      } finally {
        await fresh.close();
      }
    });
  });
});
