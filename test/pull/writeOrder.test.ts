import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { type Fence, LeaseLostError } from '../../src/jobs/lease.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { toReviewRow } from '../../src/mirror/reviewRow.js';
import { upsertReviews } from '../../src/mirror/reviewsSql.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import type { Review } from '../../src/partner-api/reviewsSchema.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
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
    // On a server the first refuses only once the second has started, so both are in flight.
    let calls = 0;
    let secondStarted = () => {};
    const second = new Promise<void>((resolve) => {
      secondStarted = resolve;
    });
    const failFirst: Fence = async () => {
      calls++;
      if (calls === 2) secondStarted();
      if (calls > 1) return;
      if (db.backend === 'postgres') await second;
      throw new LeaseLostError('refused for the test');
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

  it('reads a COPY group that meets a stored review again and upserts it, storing the feed exactly', async () => {
    // The feed's oldest review is stored already, landed by a webhook with a version newer than
    // the feed's: whichever group by COPY reaches it is refused.
    const feed: Review[] = [];
    for await (const page of api.reviews.pages(null, null)) feed.push(...page.items);
    const position = new Map(feed.map((review, i) => [review.id, i]));
    const landed = feed[4_999]!;
    const newer = new Date(Date.now() + 60_000);
    await upsertReviews(
      db.knex,
      db,
      [{ ...toReviewRow(landed, newer), comment: 'from the webhook' }],
      'webhook',
    );
    const count = async () => Number((await db.knex(db.table('reviews')).count({ n: '*' }))[0]?.n);

    // The feed as the platform serves it, held back once: the page of the 1,001st review comes
    // only once the first group (the upsert of the first thousand, all new) is committed, so the
    // next group is by COPY. Every group after it is too, until one is refused.
    const holding: PartnerApi = {
      ...api,
      reviews: {
        ...api.reviews,
        async *pages(since, cursor, signal) {
          for await (const page of api.reviews.pages(since, cursor, signal)) {
            if (position.get(page.items[0]?.id ?? '') === 1_000)
              await waitFor(async () => (await count()) >= 1_001);
            yield page;
          }
        },
      },
    };
    const lines: string[] = [];
    const log = makeLogger({
      level: 'debug',
      scrubber: new SecretScrubber(),
      destination: new Writable({
        write(chunk, _encoding, callback) {
          lines.push(String(chunk));
          callback();
        },
      }),
    });
    const counts: RunCounts = {};
    await syncReviews(pullContext(db, holding, { log }), counts);

    expect(lines.filter((line) => line.includes('a group met stored reviews')).length).toBeGreaterThanOrEqual(
      1,
    );
    expect(counts).toMatchObject({ fetched: 5_000, inserted: 4_999, updated: 1 });
    const stored = await db.knex(db.table('reviews')).select('id', 'comment', 'source', 'rating');
    expect(stored).toHaveLength(5_000);
    const byId = new Map(stored.map((r) => [r.id as string, r]));
    for (const review of feed) expect(Number(byId.get(review.id)?.rating)).toBe(review.rating);
    expect(byId.get(landed.id)).toMatchObject({ comment: 'from the webhook', source: 'webhook' });
  });
});

describe('a COPY group while the platform is slow to answer (on a PostgreSQL server)', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 1_500, seed: 37 });
    db = await freshDb({ url: POSTGRES_URL });
    api = testApi(sandbox);
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  it('commits the pages it took within a second instead of holding its transaction open for the next', async () => {
    // The feed as the platform serves it, with two pauses: before page 11, so the first group (pages
    // 1–10) is stored and page 11 opens a COPY group; and a long one before page 13, as a page
    // the platform answered only after retries.
    let waitingForPage13 = false;
    let page13Given = false;
    const slow: PartnerApi = {
      ...api,
      reviews: {
        ...api.reviews,
        async *pages(since, cursor, signal) {
          let page = 0;
          for await (const fetched of api.reviews.pages(since, cursor, signal)) {
            page++;
            if (page === 11) await sleep(300);
            if (page === 13) {
              waitingForPage13 = true;
              await sleep(3_000);
              page13Given = true;
            }
            yield fetched;
          }
        },
      },
    };
    const count = async () => Number((await db.knex(db.table('reviews')).count({ n: '*' }))[0]?.n);
    const counts: RunCounts = {};
    const run = syncReviews(pullContext(db, slow), counts);
    await waitFor(async () => waitingForPage13);
    const stored = await waitFor(async () => {
      const n = await count();
      return n > 1_000 ? n : undefined;
    }, 10_000);
    // Pages 11 and 12 were stored with their checkpoint while page 13 was still awaited.
    expect(page13Given).toBe(false);
    expect(stored).toBe(1_200);
    expect((await readCheckpoint(db.knex, db, JOB.reviews)).cursor).not.toBeNull();
    await run;
    expect(await count()).toBe(1_500);
    expect(counts).toMatchObject({ fetched: 1_500, inserted: 1_500 });
  });
});
