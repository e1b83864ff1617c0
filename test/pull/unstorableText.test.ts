import { describe, expect, it } from 'vitest';
import { JOB } from '../../src/jobs/jobNames.js';
import { ApiProtocolError } from '../../src/partner-api/errors.js';
import { backfillReviews } from '../../src/pull/backfillReviews.js';
import { syncLocations } from '../../src/pull/syncDirectory.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { fakePlatformFixture, feedReview, pullContext } from './helpers.js';

type Json = Record<string, unknown>;

const MINUTE = 60_000;

const failure = (run: Promise<void>) =>
  run.then(
    () => undefined,
    (e: unknown) => e,
  );

const location = (id: unknown): Json => ({
  id,
  slug: `loc-${String(id).length}`,
  name: 'Location',
  active: true,
  address: { line1: null, line2: null, city: 'Cork', state: null, zip: null },
  profile_url: 'https://example.test/l/1',
  default_survey_url: null,
  created_at: '2026-01-01T10:00:00Z',
});

/** A rejected record's id is written and compared in SQL, which cannot hold U+0000. */
describe('a rejected record whose id holds U+0000', () => {
  const valid = feedReview(0, Date.now() - MINUTE);
  const fx = fakePlatformFixture(({ path, query }) => {
    if (path === '/reviews') {
      const reviews = [valid, { ...feedReview(1, Date.now() - 2 * MINUTE), id: 'bad\u0000id' }];
      return {
        status: 200,
        body: { reviews, pagination: { count: 2, has_more: false, next_cursor: null } },
      };
    }
    if (path === '/locations') {
      const locations = query.get('active') === 'true' ? [location(1), location('x\u0000')] : [];
      return {
        status: 200,
        body: { locations, pagination: { count: locations.length, has_more: false, next_cursor: null } },
      };
    }
    return { status: 404, body: { error: 'not found' } };
  });

  it('is quarantined under its id with U+FFFD, and the valid review beside it stored', async () => {
    await syncReviews(pullContext(fx.db, fx.api), {});
    expect(await fx.db.knex(fx.db.table('reviews')).pluck('id')).toEqual([valid.id]);
    expect(await fx.db.knex(fx.db.table('review_quarantine')).pluck('review_id')).toEqual(['bad\uFFFDid']);
    expect((await readCheckpoint(fx.db.knex, fx.db, JOB.reviews)).watermark?.toISOString()).toBe(
      valid.created_at,
    );
  });

  it('is quarantined the same in a directory listing, and the valid location beside it stored', async () => {
    await syncLocations(pullContext(fx.db, fx.api), {});
    expect(await fx.db.knex(fx.db.table('locations')).pluck('id')).toEqual([1]);
    expect(await fx.db.knex(fx.db.table('directory_quarantine')).pluck('record_id')).toEqual(['x\uFFFD']);
  });
});

/**
 * The walk's checkpoint keeps the cursor as text, which cannot hold U+0000: such a cursor stops
 * the walk with an error naming it, and what came before it is stored.
 */
describe('a next_cursor holding U+0000', () => {
  const newest = Date.now() - 10 * MINUTE;
  const feed = Array.from({ length: 300 }, (_, i) => feedReview(i, newest - i * MINUTE));
  const cursorAfter = (page: number) => (page === 2 ? 'opaque\u0000cursor' : `c${page}`);
  const fx = fakePlatformFixture(({ path, query }) => {
    if (path !== '/reviews') return { status: 404, body: { error: 'not found' } };
    const cursor = query.get('cursor');
    const page = cursor === null ? 0 : cursor === cursorAfter(2) ? 3 : Number(cursor.slice(1)) + 1;
    // Only the second run's read of the reviews above the stuck walk asks for a `since`.
    const since = query.get('since');
    const visible = since === null ? feed : feed.filter((r) => r.created_at > since);
    const reviews = visible.slice(page * 100, page * 100 + 100);
    const more = since === null ? page < 3 : page * 100 + 100 < visible.length;
    return {
      status: 200,
      body: {
        reviews,
        pagination: { count: reviews.length, has_more: more, next_cursor: more ? cursorAfter(page) : null },
      },
    };
  });

  it('fails the walk naming the cursor and its page, run after run, keeping the pages before it', async () => {
    for (let run = 0; run < 2; run++) {
      const error = await failure(syncReviews(pullContext(fx.db, fx.api), {}));
      expect(error).toBeInstanceOf(ApiProtocolError);
      // The walk resumes at the page whose next_cursor it is: its first.
      expect((error as Error).message).toBe(
        `GET /reviews broke the pagination protocol: next_cursor "opaque\\u0000cursor" of page ${run === 0 ? 3 : 1} holds a NUL character (U+0000), which cannot be stored in the walk's checkpoint`,
      );
      expect(await fx.db.knex(fx.db.table('reviews')).pluck('id')).toHaveLength(200);
      const checkpoint = await readCheckpoint(fx.db.knex, fx.db, JOB.reviews);
      expect(checkpoint).toMatchObject({ watermark: null, cursor: 'c1' });
    }
  });

  it('is followed by a backfill, which keeps no checkpoint', async () => {
    await backfillReviews(pullContext(fx.db, fx.api), { since: undefined, until: undefined }, {});
    expect(await fx.db.knex(fx.db.table('reviews')).pluck('id')).toHaveLength(300);
  });
});
