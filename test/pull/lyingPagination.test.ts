import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { ApiProtocolError } from '../../src/partner-api/errors.js';
import type { Review } from '../../src/partner-api/reviewsSchema.js';
import { reconcileReviews } from '../../src/pull/reconcileReviews.js';
import { syncLocations } from '../../src/pull/syncDirectory.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { freshDb } from '../helpers/db.js';
import { type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';
import { fakePlatformFixture, feedReview, pullContext, testApi } from './helpers.js';

/**
 * How the fake feed lies: without a cursor from the first page on, the repeats from the second;
 * `count-mismatch` drops records from the last page while its count still includes them (as a
 *   platform that counts a page before hiding its suppressed reviews would);
 * `over-limit` serves a first page of more records than asked for, every one of them invalid;
 * `empty-pages` answers every page after the first empty, claiming more under a fresh cursor.
 */
type Mode =
  | 'honest'
  | 'more-without-cursor'
  | 'repeating-cursor'
  | 'same-page-fresh-cursor'
  | 'count-mismatch'
  | 'over-limit'
  | 'empty-pages';

const PAGE = 100;
const MINUTE = 60_000;
// 250 reviews a minute apart, newest first, all in the past (a watermark never passes "now").
const newestAt = Date.now() - 10 * MINUTE;
const reviews: Review[] = Array.from({ length: 250 }, (_, i) => feedReview(i, newestAt - i * MINUTE));

/** Issue 9 items 2 and 3: the real pull against a platform whose pagination lies, over real HTTP. */
describe('a review feed whose pagination lies', () => {
  let platform: FakePlatform;
  let db: Db;
  let api: PartnerApi;
  let mode: Mode = 'honest';
  /** How many of the oldest reviews the feed shows. */
  let published = reviews.length;
  let fresh = 0;

  beforeAll(async () => {
    platform = await startFakePlatform(({ path, query }) => {
      if (path !== '/reviews') return { status: 404, body: { error: 'not found' } };
      const since = query.get('since');
      const visible = reviews
        .slice(reviews.length - published)
        .filter((r) => since === null || r.created_at >= since);
      const cursor = query.get('cursor');
      const limit = Number(query.get('limit'));
      let start = cursor === null ? 0 : Number(cursor.split(':')[1]);
      const hasMore = start + limit < visible.length;
      let next: string | null = hasMore ? `o:${start + limit}` : null;
      if (hasMore && mode === 'more-without-cursor') next = null;
      if (start >= limit && hasMore) {
        if (mode === 'repeating-cursor') next = cursor;
        if (mode === 'same-page-fresh-cursor') {
          start = limit;
          next = `o:${limit}:${fresh++}`;
        }
      }
      if (mode === 'empty-pages' && start >= limit) {
        return {
          status: 200,
          body: {
            reviews: [],
            pagination: { count: 0, has_more: true, next_cursor: `e:${limit}:${fresh++}` },
          },
        };
      }
      let page: unknown[] = visible.slice(start, start + limit);
      const count = page.length;
      if (mode === 'count-mismatch' && !hasMore) page = page.slice(0, Math.max(1, page.length - 10));
      if (mode === 'over-limit' && start === 0) {
        page = visible.slice(0, limit + 1).map((r) => ({ ...r, rating: 'four' }));
        return {
          status: 200,
          body: { reviews: page, pagination: { count: page.length, has_more: hasMore, next_cursor: next } },
        };
      }
      return {
        status: 200,
        body: { reviews: page, pagination: { count, has_more: hasMore, next_cursor: next } },
      };
    });
    db = await freshDb();
    api = testApi({ url: platform.url, apiKey: 'rm_test_key_123456' }, { pageSize: PAGE });
  });
  afterAll(async () => {
    await api?.close();
    await platform?.close();
    await db?.close();
  });
  beforeEach(() => {
    mode = 'honest';
    published = reviews.length;
  });

  const ctx = () => pullContext(db, api);
  const watermarkOf = async (job: string) => (await readCheckpoint(db.knex, db, job)).watermark;
  const stored = async () => Number((await db.knex(db.table('reviews')).count({ n: '*' }))[0]!.n);
  const removed = async () =>
    Number((await db.knex(db.table('reviews')).whereNotNull('removed_at').count({ n: '*' }))[0]!.n);
  const failure = (run: Promise<void>) =>
    run.then(
      () => undefined,
      (e: unknown) => e,
    );

  it('fails an incremental walk told "more" without a cursor, and leaves the watermark where it was', async () => {
    published = 100; // the oldest 100 are mirrored first
    await syncReviews(ctx(), {});
    const before = await watermarkOf(JOB.reviews);
    expect(before?.toISOString()).toBe(reviews[150]!.created_at);

    published = 250; // 150 newer reviews behind the watermark
    mode = 'more-without-cursor';
    const error = await failure(syncReviews(ctx(), {}));
    expect(error).toBeInstanceOf(ApiProtocolError);
    expect((error as Error).message).toBe(
      'GET /reviews broke the pagination protocol: has_more is true but next_cursor is null',
    );
    expect(await watermarkOf(JOB.reviews)).toEqual(before);

    // Once the platform tells the truth, the walk resumes and nothing is missing.
    mode = 'honest';
    await syncReviews(ctx(), {});
    expect(await stored()).toBe(250);
    expect((await watermarkOf(JOB.reviews))?.toISOString()).toBe(reviews[0]!.created_at);
  });

  it('marks nothing removed when a reconcile is told "more" without a cursor', async () => {
    mode = 'more-without-cursor';
    const error = await failure(reconcileReviews(ctx(), {}));
    expect(error).toBeInstanceOf(ApiProtocolError);
    expect(await removed()).toBe(0);
  });

  it('stops at a cursor that repeats, quickly, and marks nothing removed', async () => {
    await db.knex(db.table('sync_state')).where({ job: JOB.reconcile }).del();
    mode = 'repeating-cursor';
    const requestsBefore = platform.requests();
    const error = await failure(reconcileReviews(ctx(), {}));
    expect((error as Error).message).toBe(
      'GET /reviews broke the pagination protocol: next_cursor repeats a cursor already followed in this walk (page 2)',
    );
    expect(platform.requests() - requestsBefore).toBeLessThanOrEqual(3);
    expect(await removed()).toBe(0);
    expect(await watermarkOf(JOB.reconcile)).toBeNull();
  });

  it('stops at a page served again under a fresh cursor, and marks nothing removed', async () => {
    await db.knex(db.table('sync_state')).where({ job: JOB.reconcile }).del();
    mode = 'same-page-fresh-cursor';
    const error = await failure(reconcileReviews(ctx(), {}));
    expect((error as Error).message).toBe(
      'GET /reviews broke the pagination protocol: page 3 is the same page as the one before it',
    );
    expect(await removed()).toBe(0);
  });

  it('stops at the 50th empty page in a row claiming more, long before the page ceiling, and decides nothing', async () => {
    await db.knex(db.table('sync_state')).where({ job: JOB.reconcile }).del();
    mode = 'empty-pages';
    const requestsBefore = platform.requests();
    const error = await failure(reconcileReviews(ctx(), {}));
    expect(error).toBeInstanceOf(ApiProtocolError);
    expect((error as Error).message).toBe(
      'GET /reviews broke the pagination protocol: 50 pages in a row held no record yet claimed more (page 51)',
    );
    // The first page, 50 empty ones and at most the one fetched ahead.
    expect(platform.requests() - requestsBefore).toBeLessThanOrEqual(52);
    expect(await removed()).toBe(0);
    expect(await watermarkOf(JOB.reconcile)).toBeNull();

    const before = await watermarkOf(JOB.reviews);
    expect(before).not.toBeNull();
    await db.knex(db.table('sync_state')).where({ job: JOB.reviews }).update({ watermark: null });
    const incremental = await failure(syncReviews(ctx(), {}));
    expect(incremental).toBeInstanceOf(ApiProtocolError);
    expect(await watermarkOf(JOB.reviews)).toBeNull();
    await db
      .knex(db.table('sync_state'))
      .where({ job: JOB.reviews })
      .update({ watermark: before, cursor: null });
  });

  it('fails a walk past the page ceiling, and marks nothing removed', async () => {
    await db.knex(db.table('sync_state')).where({ job: JOB.reconcile }).del();
    const capped = testApi(
      { url: platform.url, apiKey: 'rm_test_key_123456' },
      { pageSize: PAGE, maxPagesPerWalk: 2 },
    );
    try {
      const error = await failure(reconcileReviews(pullContext(db, capped), {}));
      expect((error as Error).message).toBe(
        'GET /reviews broke the pagination protocol: the walk went past its ceiling of 2 pages',
      );
      expect(await removed()).toBe(0);
    } finally {
      await capped.close();
    }
  });

  it('takes a reconcile whose last page holds fewer records than its count says: what it lacks is removed', async () => {
    await db.knex(db.table('sync_state')).where({ job: JOB.reconcile }).del();
    mode = 'count-mismatch';
    // The page is taken with a warning (paginate.ts, countMismatchOf): the feed hides what it
    // counted, so the 10 reviews it does not hold are marked removed, as hidden ones are.
    expect(await failure(reconcileReviews(ctx(), {}))).toBeUndefined();
    expect(await removed()).toBe(10);
    // Shown again, they are no longer removed.
    mode = 'honest';
    await db.knex(db.table('sync_state')).where({ job: JOB.reconcile }).del();
    await reconcileReviews(ctx(), {});
    expect(await removed()).toBe(0);
  });

  it('takes an incremental walk on a page whose count disagrees, and moves the watermark', async () => {
    const before = await watermarkOf(JOB.reviews);
    expect(before).not.toBeNull();
    mode = 'count-mismatch';
    expect(await failure(syncReviews(ctx(), {}))).toBeUndefined();
    expect((await watermarkOf(JOB.reviews))!.getTime()).toBeGreaterThanOrEqual(before!.getTime());
  });

  it('fails a page of more records than the limit asked for, before validating any of them', async () => {
    await db.knex(db.table('sync_state')).where({ job: JOB.reconcile }).del();
    const quarantinedBefore = Number((await db.knex(db.table('review_quarantine')).count({ n: '*' }))[0]!.n);
    mode = 'over-limit';
    const error = await failure(reconcileReviews(ctx(), {}));
    // Every record of that page is invalid: validated, they would have failed it as a format change.
    expect(error).toBeInstanceOf(ApiProtocolError);
    expect((error as Error).message).toBe(
      `GET /reviews broke the pagination protocol: the page holds ${PAGE + 1} records, more than the ${PAGE} asked for`,
    );
    expect(await removed()).toBe(0);
    expect(Number((await db.knex(db.table('review_quarantine')).count({ n: '*' }))[0]!.n)).toBe(
      quarantinedBefore,
    );
  });

  it('ends at has_more false (a cursor beside it is ignored) and then reconciles exactly', async () => {
    await db.knex(db.table('sync_state')).where({ job: JOB.reconcile }).del();
    published = 249; // the oldest review is gone from the platform
    await reconcileReviews(ctx(), {});
    expect(await removed()).toBe(1);
  });
});

/** The directory listings are held to the same page protocol (spec 2.6) as the feed. */
describe('a directory listing whose count lies', () => {
  const location = (id: number) => ({
    id,
    slug: `loc-${id}`,
    name: `Location ${id}`,
    active: true,
    address: { line1: null, line2: null, city: null, state: null, zip: null },
    profile_url: `https://example.test/l/${id}`,
    default_survey_url: null,
    created_at: '2026-01-01T10:00:00Z',
  });
  let lying = false;
  let emptyPages = false;
  let fresh = 0;
  const fx = fakePlatformFixture(({ path, query }) => {
    if (path !== '/locations') return { status: 404, body: { error: 'Location not found' } };
    if (emptyPages && query.get('active') === 'true') {
      // The listing never ends: empty pages claiming more, each under a fresh cursor.
      return {
        status: 200,
        body: { locations: [], pagination: { count: 0, has_more: true, next_cursor: `e${fresh++}` } },
      };
    }
    const listed = query.get('active') === 'true' ? [location(1), location(2)] : [];
    // The page says it holds both locations, but one was lost on the way.
    const locations = lying ? listed.slice(0, 1) : listed;
    return {
      status: 200,
      body: { locations, pagination: { count: listed.length, has_more: false, next_cursor: null } },
    };
  });

  it('takes the listing as it came: the location it lacks is read by its slug, and removed on its 404', async () => {
    await syncLocations(pullContext(fx.db, fx.api), {});
    lying = true;
    await syncLocations(pullContext(fx.db, fx.api), {});
    const rows = await fx.db.knex(fx.db.table('locations')).orderBy('id').select('id', 'removed_at');
    expect(rows).toEqual([
      { id: 1, removed_at: null },
      { id: 2, removed_at: expect.any(Date) },
    ]);
    // Listed again, it is no longer removed.
    lying = false;
    await syncLocations(pullContext(fx.db, fx.api), {});
    const again = await fx.db.knex(fx.db.table('locations')).orderBy('id').select('id', 'removed_at');
    expect(again.map((r) => r.removed_at)).toEqual([null, null]);
  });

  it('fails the sync at the 50th empty page in a row claiming more, and marks nothing removed', async () => {
    lying = false;
    emptyPages = true;
    const requestsBefore = fx.platform.requests();
    const error = await syncLocations(pullContext(fx.db, fx.api), {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ApiProtocolError);
    expect((error as Error).message).toBe(
      'GET /locations broke the pagination protocol: 50 pages in a row held no record yet claimed more (page 50)',
    );
    expect(fx.platform.requests() - requestsBefore).toBeLessThanOrEqual(52);
    const rows = await fx.db.knex(fx.db.table('locations')).orderBy('id').select('id', 'removed_at');
    expect(rows).toEqual([
      { id: 1, removed_at: null },
      { id: 2, removed_at: null },
    ]);
  });
});
