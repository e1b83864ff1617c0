import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { JobLease, LeaseLostError } from '../../src/jobs/lease.js';
import { acquireLease } from '../../src/jobs/leaseSql.js';
import { runJob } from '../../src/jobs/runner.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { reconcileReviews } from '../../src/pull/reconcileReviews.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { expectExactMirror } from '../helpers/oracle.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { fakePlatformFixture, feedReview, pullContext, testApi } from './helpers.js';

describe('reconcile: removals the incremental feed cannot show', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 2_000, seed: 5 });
    db = await freshDb();
    api = testApi(sandbox);
    await runJob(
      { db: db, log: quietLog },
      { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(db, api), c, s) },
      {
        wait: true,
      },
    );
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  const reconcile = (signal?: AbortSignal) =>
    runJob(
      { db: db, log: quietLog },
      { name: JOB.reconcile, run: (c, s) => reconcileReviews(pullContext(db, api), c, s) },
      {
        wait: true,
        signal,
      },
    );
  const removedIds = async () =>
    (await db.knex(db.table('reviews')).whereNotNull('removed_at').pluck('id')).sort() as string[];

  it('marks a suppressed review removed, and clears the mark once it is unsuppressed', async () => {
    const truth = await sandbox.control.visibleReviews(sandbox.companyId);
    const suppressed = [truth[0]!.id, truth[1_234]!.id, truth.at(-1)!.id].sort();
    for (const id of suppressed) await sandbox.control.suppress(id);

    // The incremental feed cannot show a disappearance.
    await runJob(
      { db: db, log: quietLog },
      { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(db, api), c, s) },
      {
        wait: true,
      },
    );
    expect(await removedIds()).toEqual([]);

    const run = await reconcile();
    expect(run.counts).toMatchObject({ pages: 20, fetched: 1_997, removed: 3 });
    expect(await removedIds()).toEqual(suppressed);
    await expectExactMirror(db, sandbox);

    await sandbox.control.unsuppress(suppressed[0]!);
    expect((await reconcile()).counts.removed).toBe(0);
    expect(await removedIds()).toEqual(suppressed.slice(1));
    await expectExactMirror(db, sandbox);
  });

  it('marks nothing when interrupted halfway, and finishes the same walk when run again', async () => {
    const visible = await sandbox.control.visibleReviews(sandbox.companyId);
    const victim = visible[1_500]!.id;
    await sandbox.control.suppress(victim);
    await sandbox.control.setFaults({ partner: { delay: 1, delayMs: 20 } });
    const stop = new AbortController();
    const interrupted = reconcile(stop.signal);
    await waitFor(async () => (await readCheckpoint(db.knex, db, JOB.reconcile)).cursor !== null, 20_000, 5);
    stop.abort(new Error('stopped halfway'));
    await expect(interrupted).rejects.toThrow('stopped halfway');
    await sandbox.control.setFaults({});
    const mid = await readCheckpoint(db.knex, db, JOB.reconcile);
    expect(mid.cursor).not.toBeNull();
    expect(mid.walkStartedAt).not.toBeNull();
    expect(await removedIds()).not.toContain(victim);

    const resumed = await reconcile();
    expect(resumed.counts.resumed).toBe(1);
    expect(resumed.counts.removed).toBe(1);
    expect(await removedIds()).toContain(victim);
    await expectExactMirror(db, sandbox);
  });

  it('leaves reviews that arrived by webhook during the walk alone', async () => {
    // A row first seen after the walk began (here: inserted directly, as the receiver would).
    await db.knex(db.table('reviews')).insert({
      id: '11111111-2222-4333-8444-555555555555',
      review_number: 'R-00000001',
      created_at: new Date(),
      rating: 5,
      is_verified: true,
      source: 'webhook',
      observed_at: new Date(),
      first_seen_at: new Date(Date.now() + 60_000),
    });
    await reconcile();
    const row = await db
      .knex(db.table('reviews'))
      .where({ id: '11111111-2222-4333-8444-555555555555' })
      .first();
    expect(row.removed_at).toBeNull();
  });
});

/** A review that still exists, sent invalid, is quarantined: the walk saw it, so it is not removed. */
describe('reconcile: a stored review the feed now sends invalid', () => {
  const newest = Date.now() - 60_000;
  const feed = Array.from({ length: 3 }, (_, i) => feedReview(i, newest - i * 60_000));
  let invalid = false;
  const fx = fakePlatformFixture(({ path }) => {
    if (path !== '/reviews') return { status: 404, body: { error: 'not found' } };
    const reviews = feed.map((r, i) => (invalid && i === 1 ? { ...r, rating: '4.0', comment: 'edited' } : r));
    return { status: 200, body: { reviews, pagination: { count: 3, has_more: false, next_cursor: null } } };
  });

  it('keeps its last valid version, not marked removed, and quarantines what was sent', async () => {
    await reconcileReviews(pullContext(fx.db, fx.api), {});
    invalid = true;
    const counts: Record<string, number> = {};
    await reconcileReviews(pullContext(fx.db, fx.api), counts);
    expect(counts).toMatchObject({ quarantined: 1, removed: 0 });
    const row = await fx.db.knex(fx.db.table('reviews')).where({ id: feed[1]!.id }).first();
    expect(row).toMatchObject({ removed_at: null, comment: feed[1]!.comment });
    expect(await fx.db.knex(fx.db.table('review_quarantine')).pluck('review_id')).toEqual([feed[1]!.id]);
  });
});

/**
 * The removals are marked in the transaction of the last page, after its fence: the fence's row
 * lock on the lease holds any takeover back until that transaction ends (test/jobs/lease.test.ts),
 * so a replica marks removals only while it holds the job, and one that lost it marks nothing.
 */
describe('reconcile: a replica that lost the job', () => {
  it('marks no removal on its last page, and the new holder marks it', async () => {
    // One page: the first write is the last page's.
    const sandbox = await testSandbox({ seedReviews: 20, seed: 9 });
    const db = await freshDb();
    const api = testApi(sandbox);
    try {
      await runJob(
        { db, log: quietLog },
        { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(db, api), c, s) },
        { wait: true },
      );
      const [victim] = await sandbox.control.visibleReviews(sandbox.companyId);
      await sandbox.control.suppress(victim!.id);
      const settings = { holder: 'replica-a', seconds: 30 };
      const lost = await JobLease.tryAcquire(db, JOB.reconcile, settings, quietLog);
      // The lease runs out (replica-a stalled) and replica-b takes the job over.
      await db
        .knex(db.table('job_leases'))
        .where({ job: JOB.reconcile })
        .update({ expires_at: db.knex.raw("now() - interval '1 second'") });
      expect(await acquireLease(db.knex, db, JOB.reconcile, 'replica-b', 30)).toBeDefined();
      try {
        await expect(reconcileReviews(pullContext(db, api), {}, undefined, lost!.fence)).rejects.toThrow(
          LeaseLostError,
        );
      } finally {
        await lost!.release();
      }
      const removed = () => db.knex(db.table('reviews')).whereNotNull('removed_at').pluck('id');
      expect(await removed()).toEqual([]);
      await db
        .knex(db.table('job_leases'))
        .where({ job: JOB.reconcile })
        .update({ expires_at: db.knex.fn.now() });
      const run = await runJob(
        { db, log: quietLog },
        { name: JOB.reconcile, run: (c, s) => reconcileReviews(pullContext(db, api), c, s) },
        { wait: true },
      );
      expect(run.counts.removed).toBe(1);
      expect(await removed()).toEqual([victim!.id]);
    } finally {
      await api.close();
      await db.close();
      await sandbox.close();
    }
  });
});
