import { describe, expect, it } from 'vitest';
import { JOB } from '../../src/jobs/jobNames.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { ApiProtocolError } from '../../src/partner-api/errors.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { fakePlatformFixture, feedReview, pullContext } from './helpers.js';

const MINUTE = 60_000;
const PAGE = 3;
/** The cursor of the page the platform serves broken: has_more true without a next_cursor. */
const BROKEN = '6';

/**
 * A walk resumed at a page the client refuses fails there at every run, its checkpoint kept. The
 * reviews created since must still be polled: the run reads the feed above the stuck walk, and
 * still fails, so the operator sees the page, while the stuck walk keeps its checkpoint.
 */
describe('a walk stuck on a page the platform serves broken', () => {
  // Newest first, 20 minutes apart: the overlap (10 minutes) behind the newest holds it alone.
  const start = Date.now() - 60 * MINUTE;
  let feed: Array<Record<string, unknown>> = Array.from({ length: 12 }, (_, i) =>
    feedReview(i, start - i * 20 * MINUTE),
  );
  let brokenServed = true;
  const fx = fakePlatformFixture(
    ({ path, query }) => {
      if (path !== '/reviews') return { status: 404, body: { error: 'not found' } };
      const since = query.get('since');
      const visible = feed.filter((r) => since === null || String(r.created_at) > since);
      const cursor = query.get('cursor');
      const offset = Number(cursor ?? 0);
      const page = visible.slice(offset, offset + PAGE);
      const hasMore = offset + PAGE < visible.length;
      const broken = brokenServed && cursor === BROKEN;
      return {
        status: 200,
        body: {
          reviews: page,
          pagination: {
            count: page.length,
            has_more: hasMore,
            next_cursor: hasMore && !broken ? String(offset + PAGE) : null,
          },
        },
      };
    },
    { pageSize: PAGE },
  );
  const stored = async () =>
    (await fx.db.knex(fx.db.table('reviews')).select('review_number')).map((r) => r.review_number).sort();
  const run = async (counts: RunCounts = {}) => ({
    outcome: await syncReviews(pullContext(fx.db, fx.api), counts).then(
      () => undefined,
      (error: unknown) => error,
    ),
  });

  it('still stores the reviews created since, fails naming the page, and keeps the stuck checkpoint', async () => {
    // The first run stores two pages, then stops at the broken one, its cursor checkpointed.
    expect((await run()).outcome).toBeInstanceOf(ApiProtocolError);
    expect(await stored()).toEqual(['R-0', 'R-1', 'R-2', 'R-3', 'R-4', 'R-5']);
    const stuck = await readCheckpoint(fx.db.knex, fx.db, JOB.reviews);
    expect(stuck.cursor).toBe(BROKEN);

    feed = [feedReview(100, Date.now() - 2 * MINUTE), feedReview(101, Date.now() - MINUTE), ...feed].sort(
      (a, b) => String(b.created_at).localeCompare(String(a.created_at)),
    );
    const counts: RunCounts = {};
    const { outcome } = await run(counts);
    expect(outcome).toBeInstanceOf(ApiProtocolError);
    expect((outcome as Error).message).toContain('has_more is true but next_cursor is null');
    expect(counts).toMatchObject({ resumed: 1, head_passes: 1 });
    expect(await stored()).toEqual(['R-0', 'R-1', 'R-100', 'R-101', 'R-2', 'R-3', 'R-4', 'R-5']);
    expect(await readCheckpoint(fx.db.knex, fx.db, JOB.reviews)).toEqual(stuck);

    // Served whole again, the stuck walk goes on from its page and completes.
    brokenServed = false;
    expect((await run()).outcome).toBeUndefined();
    expect((await stored()).length).toBe(14);
    const done = await readCheckpoint(fx.db.knex, fx.db, JOB.reviews);
    expect(done.cursor).toBeNull();
    expect(done.watermark?.toISOString()).toBe(feed.find((r) => r.review_number === 'R-0')?.created_at);
  });
});
