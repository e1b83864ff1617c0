import { describe, expect, it } from 'vitest';
import { JOB } from '../../src/jobs/jobNames.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { fakePlatformFixture, feedReview, pullContext } from './helpers.js';

const MINUTE = 60_000;

/**
 * Review ids over real HTTP and a real database: one sent in two letter cases within one write
 * group (a feed that shifted between pages, ids printed by two services), and one whose version
 * and variant digits RFC 9562 does not define, which PostgreSQL's uuid type stores all the same.
 */
describe('review ids in any case and any variant', () => {
  const newestAt = Date.now() - 10 * MINUTE;
  const feed: Array<Record<string, unknown> & { id: string; created_at: string }> = Array.from(
    { length: 6 },
    (_, i) => feedReview(i, newestAt - i * MINUTE),
  );
  const twice = feed[1]!.id;
  // The same review again further down, its id in upper case; its newer reading comes first.
  feed[4] = { ...feed[1]!, id: twice.toUpperCase(), comment: 'older reading' };
  const nonStandard = '6F1C2A5E-8A7B-0C1D-0E2F-0A1B2C3D4E5F';
  feed[2] = { ...feed[2]!, id: nonStandard, professional: { id: nonStandard, name: 'Dr Q' } };

  const fx = fakePlatformFixture(
    ({ path, query }) => {
      if (path !== '/reviews') return { status: 404, body: { error: 'not found' } };
      // Pages of two: every page of the walk lands in one write group.
      const start = Number(query.get('cursor') ?? 0);
      const page = feed.slice(start, start + 2);
      const more = start + 2 < feed.length;
      return {
        status: 200,
        body: {
          reviews: page,
          pagination: { count: page.length, has_more: more, next_cursor: more ? String(start + 2) : null },
        },
      };
    },
    { pageSize: 2 },
  );

  it('stores each review once, under its id in lower case, and quarantines none', async () => {
    await syncReviews(pullContext(fx.db, fx.api), {});
    const rows = await fx.db
      .knex(fx.db.table('reviews'))
      .orderBy('created_at', 'desc')
      .select('id', 'professional_id');
    expect(rows.map((r) => r.id)).toEqual([
      feed[0]!.id,
      twice,
      nonStandard.toLowerCase(),
      feed[3]!.id,
      feed[5]!.id,
    ]);
    expect(rows[2]!.professional_id).toBe(nonStandard.toLowerCase());
    expect(Number((await fx.db.knex(fx.db.table('review_quarantine')).count({ n: '*' }))[0]!.n)).toBe(0);
    expect((await readCheckpoint(fx.db.knex, fx.db, JOB.reviews)).watermark?.toISOString()).toBe(
      feed[0]!.created_at,
    );
  });
});
