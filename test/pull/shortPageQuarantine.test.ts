import { describe, expect, it } from 'vitest';
import { JOB } from '../../src/jobs/jobNames.js';
import { reconcileReviews } from '../../src/pull/reconcileReviews.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { fakePlatformFixture, feedReview, pullContext } from './helpers.js';

const MINUTE = 60_000;
const PAGE = 100;

/**
 * Two invalid records are most of a short page (the few new reviews of a poll, the last page of a
 * walk) but not of a full one: they are quarantined, and the walk goes on, instead of being taken
 * for a format change that stops every walk reading that page, for ever.
 */
describe('two invalid records on a short page', () => {
  // Newest first: 150 reviews an hour old and more, 20 minutes apart, so that the overlap window
  // (10 minutes) behind the newest holds that one alone.
  const start = Date.now() - 60 * MINUTE;
  let feed: Array<Record<string, unknown>> = Array.from({ length: 150 }, (_, i) =>
    feedReview(i, start - i * 20 * MINUTE),
  );

  const fx = fakePlatformFixture(
    ({ path, query }) => {
      if (path !== '/reviews') return { status: 404, body: { error: 'not found' } };
      const since = query.get('since');
      const visible = feed.filter((r) => since === null || String(r.created_at) > since);
      const offset = Number(query.get('cursor') ?? 0);
      const limit = Number(query.get('limit'));
      const page = visible.slice(offset, offset + limit);
      const hasMore = offset + limit < visible.length;
      return {
        status: 200,
        body: {
          reviews: page,
          pagination: {
            count: page.length,
            has_more: hasMore,
            next_cursor: hasMore ? String(offset + limit) : null,
          },
        },
      };
    },
    { pageSize: PAGE },
  );

  const ctx = () => pullContext(fx.db, fx.api);
  const quarantined = async () =>
    Number((await fx.db.knex(fx.db.table('review_quarantine')).count({ n: '*' }))[0]!.n);

  it('a poll of three new reviews, two invalid: stores the valid one, quarantines two, and the next poll too', async () => {
    await syncReviews(ctx(), {});
    const valid = feedReview(1000, Date.now() - 3 * MINUTE);
    feed = [
      { ...feedReview(1001, Date.now() - MINUTE), rating: 9 },
      { ...feedReview(1002, Date.now() - 2 * MINUTE), rating: 7 },
      valid,
      ...feed,
    ];
    // The second run re-reads the overlap window, which now holds the three new reviews alone:
    // the two invalid ones are sighted again, which is no format change.
    for (let run = 0; run < 2; run++) {
      await syncReviews(ctx(), {});
      expect(await fx.db.knex(fx.db.table('reviews')).where({ id: valid.id }).first()).toBeDefined();
      expect(await quarantined()).toBe(2);
      expect((await readCheckpoint(fx.db.knex, fx.db, JOB.reviews)).watermark?.toISOString()).toBe(
        valid.created_at,
      );
    }
  });

  it('a reconcile whose last page holds three records, two invalid, completes and marks what is gone', async () => {
    // 101 of the 153 reviews stay, and two invalid ones older than all: a page of 100, then a last
    // page of 3, two of them invalid.
    const oldest = Date.now() - 10_000 * MINUTE;
    const gone = feed.slice(101);
    feed = [
      ...feed.slice(0, 101),
      { ...feedReview(2000, oldest), created_at: 'long ago' },
      { ...feedReview(2001, oldest - MINUTE), created_at: 'longer ago' },
    ];
    const counts: Record<string, number> = {};
    await reconcileReviews(ctx(), counts);
    expect(counts).toMatchObject({ removed: gone.length });
    const removed = await fx.db.knex(fx.db.table('reviews')).whereNotNull('removed_at').pluck('id');
    expect(removed.sort()).toEqual(gone.map((r) => r.id).sort());
    expect(await quarantined()).toBe(4);
  });
});
