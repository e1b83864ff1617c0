import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { type Fence, LeaseLostError } from '../../src/jobs/lease.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { toReviewRow } from '../../src/mirror/reviewRow.js';
import { upsertReviews } from '../../src/mirror/reviewsSql.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import type { Review } from '../../src/partner-api/reviewsSchema.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { pullContext, testApi } from './helpers.js';

describe('groups of pages written at once', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 5_000, seed: 29 });
    db = await freshDb();
    api = testApi(sandbox);
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  it('never commits a checkpoint past a group whose write failed, even one written beside it', async () => {
    // Only the first group's transaction is refused; the groups after it are written while it
    // fails, and must roll back with it rather than checkpoint past its rows.
    let calls = 0;
    const failFirst: Fence = async () => {
      if (calls++ === 0) throw new LeaseLostError('refused for the test');
    };
    await expect(syncReviews(pullContext(db, api), {}, undefined, failFirst)).rejects.toThrow(LeaseLostError);
    // On a server the group beside it was written too; the embedded database writes one at a time.
    expect(calls).toBe(db.backend === 'postgres' ? 2 : 1);
    const state = await readCheckpoint(db.knex, db, JOB.reviews);
    expect(state.cursor).toBeNull();
    expect(state.watermark).toBeNull();
    const count = async () => Number((await db.knex(db.table('reviews')).count({ n: '*' }))[0]?.n);
    expect(await count()).toBe(0);

    // The next run starts the walk again from the newest review and completes it.
    await syncReviews(pullContext(db, api), {});
    expect(await count()).toBe(5_000);
  });
});

describe('groups of new reviews written by COPY (on a PostgreSQL server)', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 5_000, seed: 31 });
    db = await freshDb({ url: POSTGRES_URL });
    api = testApi(sandbox);
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  it('writes a group that meets a stored review again by the upsert, and stores the feed exactly', async () => {
    // The feed's 2,501st review (in the third group of a thousand) is stored already, landed by a
    // webhook with a version newer than the feed's.
    const feed: Review[] = [];
    for await (const page of api.reviews.pages(null, null)) feed.push(...page.items);
    const landed = feed[2_500]!;
    const newer = new Date(Date.now() + 60_000);
    await upsertReviews(
      db.knex,
      db,
      [{ ...toReviewRow(landed, newer), comment: 'from the webhook' }],
      'webhook',
    );

    // Every transaction of a group asks the fence first: one more call than there are groups
    // means one group was rolled back and written again.
    let transactions = 0;
    const counting: Fence = async () => {
      transactions++;
    };
    const counts: RunCounts = {};
    await syncReviews(pullContext(db, api), counts, undefined, counting);

    // The first two groups are upserted (nothing is known of the table yet); the third is the
    // first by COPY, meets the stored review, and is written again by the upsert.
    expect(transactions).toBe(5 + 1);
    expect(counts).toMatchObject({ fetched: 5_000, inserted: 4_999, updated: 1 });
    const stored = await db.knex(db.table('reviews')).select('id', 'comment', 'source', 'rating');
    expect(stored).toHaveLength(5_000);
    const byId = new Map(stored.map((r) => [r.id as string, r]));
    for (const review of feed) expect(Number(byId.get(review.id)?.rating)).toBe(review.rating);
    expect(byId.get(landed.id)).toMatchObject({ comment: 'from the webhook', source: 'webhook' });
  });
});
