import { describe, expect, it } from 'vitest';
import { DEEPER_NOT_KEPT } from '../../src/db/storableText.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { runJob } from '../../src/jobs/runner.js';
import { makeMetrics } from '../../src/metrics.js';
import { ApiSchemaError } from '../../src/partner-api/errors.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { formatStatus, readStatus } from '../../src/status/report.js';
import { quietLog } from '../helpers/log.js';
import { fakePlatformFixture, feedReview, pullContext } from './helpers.js';

const MINUTE = 60_000;

/** Issue 9 item 1: the real pull over real HTTP against a feed carrying records that fail the schema. */
describe('a review feed with invalid records', () => {
  const metrics = makeMetrics();
  // Newest first; six broken records among 250, five of them on the first page.
  const start = Date.now() - 500 * MINUTE;
  const feed: Array<Record<string, unknown>> = Array.from({ length: 250 }, (_, i) =>
    feedReview(i, start - i * MINUTE),
  );
  // Its comment ends in half an emoji, which jsonb cannot hold: it is kept as U+FFFD.
  feed[3] = { ...feed[3], rating: 7, comment: 'cut \ud83d' };
  feed[10] = { ...feed[10], created_at: 'not-a-date' };
  // Valid ISO 8601 that PostgreSQL cannot store: year zero, and an offset past its ±15:59.
  feed[20] = { ...feed[20], created_at: '0000-06-01T00:00:00Z' };
  feed[30] = { ...feed[30], created_at: '2026-01-01T10:00:00+16:00' };
  // Past what a B-tree entry of the review_number index can hold (2,704 bytes).
  feed[60] = {
    ...feed[60],
    review_number: Array.from({ length: 2_000 }, (_, i) => ((i * 2_654_435_761) % 2 ** 32).toString(36)).join(
      '',
    ),
  };
  const { id: _, ...withoutId } = feed[42]!;
  feed[42] = withoutId;
  let brokenFormat = false;

  const fx = fakePlatformFixture(
    ({ path, query }) => {
      if (path !== '/reviews') return { status: 404, body: { error: 'not found' } };
      const since = query.get('since');
      const visible = feed.filter((r) => since === null || String(r.created_at) >= since);
      const offset = Number(query.get('cursor') ?? 0);
      const limit = Number(query.get('limit'));
      const page = visible
        .slice(offset, offset + limit)
        .map((r) => (brokenFormat ? { ...r, rating: String(r.rating) } : r));
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
    { pageSize: 100 },
  );

  const sync = () =>
    runJob(
      { db: fx.db, log: quietLog, metrics },
      { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(fx.db, fx.api, { metrics }), c, s) },
      { wait: false },
    );
  const stored = async () => Number((await fx.db.knex(fx.db.table('reviews')).count({ n: '*' }))[0]!.n);
  const quarantined = async () =>
    Number((await fx.db.knex(fx.db.table('review_quarantine')).count({ n: '*' }))[0]!.n);

  it('stores every valid record, quarantines the invalid ones with their reason, and moves on', async () => {
    const run = await sync();
    expect(run.outcome).toBe('success');
    expect(run.counts).toMatchObject({ fetched: 244, inserted: 244, quarantined: 6 });
    expect(await stored()).toBe(244);
    const rows = await fx.db.knex(fx.db.table('review_quarantine')).orderBy('id');
    expect(rows.map((r) => [r.review_id, r.reason])).toEqual([
      [feed[3]!.id, expect.stringMatching(/^rating: /)],
      [feed[10]!.id, 'created_at: must be an ISO 8601 timestamp'],
      [feed[20]!.id, expect.stringMatching(/^created_at: must be a timestamp PostgreSQL can store/)],
      [feed[30]!.id, expect.stringMatching(/^created_at: must be a timestamp PostgreSQL can store/)],
      [null, expect.stringMatching(/^id: /)],
      [feed[60]!.id, 'review_number: must be at most 500 characters'],
    ]);
    expect(rows[0].raw).toEqual({ ...feed[3], comment: 'cut \uFFFD' });
    expect(await metrics.registry.metrics()).toContain('review_mirror_reviews_quarantined_total 6');
    const report = await readStatus(fx.db);
    expect(report.quarantine).toMatchObject({ records: 6 });
    expect(formatStatus(report)).toContain('quarantined    6 invalid review records');
  });

  it('keeps polling new reviews afterwards; a record seen again is one more sighting, not a new row', async () => {
    feed.unshift(feedReview(1000, Date.now() - MINUTE), feedReview(1001, Date.now() - 2 * MINUTE));
    const run = await sync();
    expect(run.outcome).toBe('success');
    expect(await stored()).toBe(246);
    expect(await quarantined()).toBe(6);
    expect(await metrics.registry.metrics()).toContain('review_mirror_reviews_quarantined_total 6');
  });

  it('stops loudly, storing nothing and leaving the watermark, when most of a page fails: a format change', async () => {
    const before = (await readCheckpoint(fx.db.knex, fx.db, JOB.reviews)).watermark;
    // More than half of a full page (100): fewer would be quarantined, as bad records of a short page.
    const now = Date.now();
    feed.unshift(...Array.from({ length: 60 }, (_, i) => feedReview(2000 + i, now - MINUTE / 2 - i * 100)));
    brokenFormat = true;
    const error = await sync().then(
      () => undefined,
      (e: unknown) => e,
    );
    brokenFormat = false;
    expect(error).toBeInstanceOf(ApiSchemaError);
    expect((error as Error).message).toMatch(/most of the page fails the schema/);
    expect((await readCheckpoint(fx.db.knex, fx.db, JOB.reviews)).watermark).toEqual(before);
    expect(await stored()).toBe(246);
    expect(await quarantined()).toBe(6);
    const failed = await fx.db.knex(fx.db.table('sync_runs')).where({ outcome: 'failed' }).first();
    expect(failed.error_kind).toBe('fatal');
  });
});

/** A platform answer JSON.parse reads whole but no recursive walk could: one record, not the run. */
describe('a review feed with records nested thousands deep', () => {
  const metrics = makeMetrics();
  const start = Date.now() - 100 * MINUTE;
  const feed = Array.from({ length: 20 }, (_, i) => JSON.stringify(feedReview(i, start - i * MINUTE)));
  const deep = `${'['.repeat(6_000)}${']'.repeat(6_000)}`;
  // An invalid record, quarantined with what it carried; and a valid one, whose extra field goes unread.
  feed[4] = feed[4]!.replace(/}$/, `,"extra":${deep},"rating":"seven"}`);
  feed[9] = feed[9]!.replace(/}$/, `,"extra":${deep}}`);
  const fx = fakePlatformFixture(({ path }) =>
    path === '/reviews'
      ? {
          status: 200,
          body: `{"reviews":[${feed.join(',')}],"pagination":{"count":20,"has_more":false,"next_cursor":null}}`,
        }
      : { status: 404, body: { error: 'not found' } },
  );

  it('quarantines the invalid one, keeping it down to the depth jsonb is given, and stores the rest', async () => {
    const run = await runJob(
      { db: fx.db, log: quietLog, metrics },
      { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(fx.db, fx.api, { metrics }), c, s) },
      { wait: false },
    );
    expect(run.outcome).toBe('success');
    expect(run.counts).toMatchObject({ fetched: 19, inserted: 19, quarantined: 1 });
    const [row] = await fx.db.knex(fx.db.table('review_quarantine'));
    expect(row.reason).toMatch(/^rating: /);
    expect(row.raw.rating).toBe('seven');
    expect(JSON.stringify(row.raw.extra)).toContain(DEEPER_NOT_KEPT);
  });
});
