import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { type Fence, LeaseLostError } from '../../src/jobs/lease.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { toReviewRow } from '../../src/mirror/reviewRow.js';
import { countReviews, upsertReviews } from '../../src/mirror/reviewsSql.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import type { Page } from '../../src/partner-api/paginate.js';
import type { Review } from '../../src/partner-api/reviewsSchema.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { pullContext, testApi } from './helpers.js';

/** A seeded sandbox, a fresh schema (on `url`, or the suite's database) and a client, per describe block. */
function feedFixture(options: { seedReviews: number; seed: number; url?: string }) {
  const fixture = {} as { sandbox: TestSandbox; db: Db; api: PartnerApi };
  beforeAll(async () => {
    fixture.sandbox = await testSandbox({ seedReviews: options.seedReviews, seed: options.seed });
    fixture.db = await freshDb(options.url === undefined ? {} : { url: options.url });
    fixture.api = testApi(fixture.sandbox);
  });
  afterAll(async () => {
    await fixture.api?.close();
    await fixture.db?.close();
    await fixture.sandbox?.close();
  });
  return fixture;
}

const storedReviews = async (db: Db) => (await countReviews(db.knex, db)).total;

/**
 * The review feed as the platform serves it, with `before` awaited ahead of each page a walk
 * takes (its number in that walk, from 1): a platform slow to answer, without touching the wire.
 */
function withPause(
  api: PartnerApi,
  before: (page: Page<Review>, number: number) => Promise<void>,
): PartnerApi {
  return {
    ...api,
    reviews: {
      ...api.reviews,
      async *pages(since, cursor, signal) {
        let number = 0;
        for await (const page of api.reviews.pages(since, cursor, signal)) {
          await before(page, ++number);
          yield page;
        }
      },
    },
  };
}

describe('groups of pages written at once', () => {
  const fixture = feedFixture({ seedReviews: 5_000, seed: 29 });

  it('never commits a checkpoint past a group whose write failed, even one written beside it', async () => {
    const { db, api } = fixture;
    // Only the first group's transaction is refused; the groups after it are written while it
    // fails, and must roll back with it rather than checkpoint past its rows. On a server the
    // first refuses only once the second (pages 11-20) has been sent to be written, which is
    // before page 21 is read, so both are in flight.
    let calls = 0;
    let secondLaunched = () => {};
    const second = new Promise<void>((resolve) => {
      secondLaunched = resolve;
    });
    const failFirst: Fence = async () => {
      calls++;
      if (db.backend === 'postgres') await second;
      throw new LeaseLostError('refused for the test');
    };
    const reading = withPause(api, async (_page, number) => {
      if (number === 21) secondLaunched();
    });
    await expect(syncReviews(pullContext(db, reading), {}, undefined, failFirst)).rejects.toThrow(
      LeaseLostError,
    );
    // The fence is a group's last statement, after the group before it has committed: the second
    // group never reached it.
    expect(calls).toBe(1);
    const state = await readCheckpoint(db.knex, db, JOB.reviews);
    expect(state.cursor).toBeNull();
    expect(state.watermark).toBeNull();
    expect(await storedReviews(db)).toBe(0);

    // The next run starts the walk again from the newest review and completes it.
    await syncReviews(pullContext(db, api), {});
    expect(await storedReviews(db)).toBe(5_000);
  });
});

describe('groups of new reviews written by COPY (on a PostgreSQL server)', () => {
  const fixture = feedFixture({ seedReviews: 5_000, seed: 31, url: POSTGRES_URL });

  it('reads a COPY group that meets a stored review again and upserts it, storing the feed exactly', async () => {
    const { db, api } = fixture;
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

    // The page of the 1,001st review comes only once the first group (the upsert of the first
    // thousand, all new) is recorded written, so the next group is by COPY, and so is every group
    // after it until one is refused.
    const counts: RunCounts = {};
    const holding = withPause(api, async (page) => {
      if (position.get(page.items[0]?.id ?? '') === 1_000) await waitFor(() => counts.inserted === 1_000);
    });
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
    await syncReviews(pullContext(db, holding, { log }), counts);

    const rereads = lines.filter((line) => line.includes('a group met stored reviews'));
    expect(rereads.length).toBeGreaterThanOrEqual(1);
    expect(counts).toMatchObject({ fetched: 5_000, inserted: 4_999, updated: 1 });
    const stored = await db.knex(db.table('reviews')).select('id', 'comment', 'source', 'rating');
    expect(stored).toHaveLength(5_000);
    const byId = new Map(stored.map((r) => [r.id as string, r]));
    for (const review of feed) expect(Number(byId.get(review.id)?.rating)).toBe(review.rating);
    expect(byId.get(landed.id)).toMatchObject({ comment: 'from the webhook', source: 'webhook' });
  });
});

describe('a COPY group while the platform is slow to answer (on a PostgreSQL server)', () => {
  const fixture = feedFixture({ seedReviews: 1_500, seed: 37, url: POSTGRES_URL });

  it('commits the pages it took within a second instead of holding its transaction open for the next', async () => {
    const { db, api } = fixture;
    // Page 11 comes once the first group (pages 1–10, all new) is recorded written, so it opens a
    // COPY group; page 13 comes three seconds after page 12, as a page the platform answered only
    // after retries.
    let waitingForPage13 = false;
    let page13Given = false;
    const counts: RunCounts = {};
    const slow = withPause(api, async (_page, number) => {
      if (number === 11) await waitFor(() => counts.inserted === 1_000);
      if (number === 13) {
        waitingForPage13 = true;
        await sleep(3_000);
        page13Given = true;
      }
    });
    const run = syncReviews(pullContext(db, slow), counts);
    await waitFor(async () => waitingForPage13);
    const stored = await waitFor(async () => {
      const n = await storedReviews(db);
      return n > 1_000 ? n : undefined;
    }, 10_000);
    // Pages 11 and 12 were stored with their checkpoint while page 13 was still awaited.
    expect(page13Given).toBe(false);
    expect(stored).toBe(1_200);
    expect((await readCheckpoint(db.knex, db, JOB.reviews)).cursor).not.toBeNull();
    await run;
    expect(await storedReviews(db)).toBe(1_500);
    expect(counts).toMatchObject({ fetched: 1_500, inserted: 1_500 });
  });
});
