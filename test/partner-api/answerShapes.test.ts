import { describe, expect, it } from 'vitest';
import { JOB } from '../../src/jobs/jobNames.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { toReviewRow } from '../../src/mirror/reviewRow.js';
import { ApiProtocolError } from '../../src/partner-api/errors.js';
import { locationPageSchema, locationSchema } from '../../src/partner-api/locationsSchema.js';
import { continuationOf, type Page, pageOf, paginate } from '../../src/partner-api/paginate.js';
import { paginationSchema } from '../../src/partner-api/paginationSchema.js';
import { professionalPageSchema } from '../../src/partner-api/professionalsSchema.js';
import { reviewPageSchema, reviewSchema } from '../../src/partner-api/reviewsSchema.js';
import { isoTimestamp } from '../../src/partner-api/timestampSchema.js';
import { syncLocations } from '../../src/pull/syncDirectory.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { newestCreatedAt } from '../../src/pull/walkPlan.js';
import { fakePlatformFixture, pullContext, testApi } from '../pull/helpers.js';

/**
 * Answers the spec leaves room for (a missing or null field, another form of the same value) that a
 * plausible platform sends: each is read without loss, and what the spec forbids is still refused.
 */

/** A logger whose every line (warn and above) the test reads, fields included. */
function capturingLog() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = { write: (line: string) => lines.push(JSON.parse(line)) };
  const log = makeLogger({
    level: 'warn',
    scrubber: new SecretScrubber(),
    destination: destination as unknown as NodeJS.WritableStream,
  });
  return { log, lines };
}

const ROUTE = 'GET /reviews';
const WHERE = { route: ROUTE, field: 'reviews', limit: 10 };

/** A review as the spec shows it, every field spelled out (spec 2.1). */
const fullReview = (i: number, over: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
  review_number: `R-${String(i).padStart(8, '0')}`,
  created_at: `2026-11-01T00:${String(i).padStart(2, '0')}:00Z`,
  rating: 5,
  comment: null,
  is_verified: true,
  reviewer: { name: null, email: null },
  professional: null,
  ...over,
});

/** `record` without `keys`, as a platform that drops null fields sends it. */
function without(record: Record<string, unknown>, ...keys: string[]): Record<string, unknown> {
  const copy = { ...record };
  for (const key of keys) delete copy[key];
  return copy;
}

describe('pagination (spec 2.6): the last page and the count', () => {
  it('reads next_cursor "" or absent as null, at the end of a walk', () => {
    for (const last of [
      { count: 0, has_more: false, next_cursor: '' },
      { count: 0, has_more: false },
      { count: 0, has_more: false, next_cursor: null },
    ]) {
      const pagination = paginationSchema.parse(last);
      expect(continuationOf(pagination, ROUTE), JSON.stringify(last)).toBeNull();
    }
  });

  it('still refuses has_more true without a usable cursor: "" and absent are no cursor either', () => {
    const lie = (pagination: unknown) => () => continuationOf(paginationSchema.parse(pagination), ROUTE);
    expect(lie({ count: 1, has_more: true, next_cursor: '' })).toThrow(
      'GET /reviews broke the pagination protocol: has_more is true but next_cursor is empty',
    );
    expect(lie({ count: 1, has_more: true })).toThrow(
      'GET /reviews broke the pagination protocol: has_more is true but next_cursor is absent',
    );
    expect(lie({ count: 1, has_more: true, next_cursor: null })).toThrow(ApiProtocolError);
  });

  it('takes a page without a count, or with a null one, and checks nothing against it', () => {
    for (const pagination of [
      { has_more: false, next_cursor: null },
      { count: null, has_more: false },
    ]) {
      const page = pageOf([fullReview(1)], paginationSchema.parse(pagination), reviewSchema, WHERE);
      expect(page.items.map((r) => r.id)).toEqual([fullReview(1).id]);
      expect(page.countMismatch).toBeUndefined();
    }
  });

  it('still refuses a pagination object without has_more, or a count that is no count', () => {
    expect(paginationSchema.safeParse({ count: 1, next_cursor: null }).success).toBe(false);
    expect(paginationSchema.safeParse({ count: '1', has_more: false }).success).toBe(false);
    expect(paginationSchema.safeParse({ count: -1, has_more: false }).success).toBe(false);
  });

  it('takes a page whose count disagrees with its records, every record validated, and says so', () => {
    // A platform that counts a page before hiding its suppressed reviews: count 3, two sent.
    const records = [fullReview(1), fullReview(2, { rating: 'five' })];
    const page = pageOf(records, { count: 3, has_more: true, next_cursor: 'c2' }, reviewSchema, WHERE);
    expect(page.items.map((r) => r.id)).toEqual([fullReview(1).id]);
    expect(page.rejected?.map((r) => r.reason)).toEqual([
      'rating: Invalid input: expected number, received string',
    ]);
    expect(page.nextCursor).toBe('c2');
    expect(page.countMismatch).toEqual({ count: 3, records: 2 });
    // The answer's array is taken, so that nothing of the answer outlives the page but what the
    // page made of it (the rejected keep their raw record): see pageOf.
    expect(records).toEqual([]);
    expect(page.rejected?.[0]?.raw).toEqual(fullReview(2, { rating: 'five' }));
    // A count below the records is reported alike; agreeing, nothing is.
    const more = pageOf([fullReview(1), fullReview(2)], { count: 1, has_more: false }, reviewSchema, WHERE);
    expect(more.countMismatch).toEqual({ count: 1, records: 2 });
    expect(more.items).toHaveLength(2);
    const agreeing = pageOf([fullReview(1)], { count: 1, has_more: false }, reviewSchema, WHERE);
    expect(agreeing.countMismatch).toBeUndefined();
  });

  it('still fails a page of more records than the limit asked for', () => {
    const records = Array.from({ length: 3 }, (_, i) => fullReview(i));
    expect(() =>
      pageOf(records, { count: 3, has_more: false }, reviewSchema, { ...WHERE, limit: 2 }),
    ).toThrow(
      'GET /reviews broke the pagination protocol: the page holds 3 records, more than the 2 asked for',
    );
  });

  it('logs a count mismatch as a warning with the route and both numbers, and walks on', async () => {
    const { log, lines } = capturingLog();
    const pages: Record<string, Page<number>> = {
      first: {
        items: [1, 2],
        nextCursor: 'b',
        receivedAt: new Date(),
        countMismatch: { count: 3, records: 2 },
      },
      b: { items: [3], nextCursor: null, receivedAt: new Date() },
    };
    const seen: number[] = [];
    for await (const page of paginate(async (c) => pages[c ?? 'first']!, null, { route: ROUTE, log })) {
      seen.push(...page.items);
    }
    expect(seen).toEqual([1, 2, 3]);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'partner API page count disagrees with its records',
        route: ROUTE,
        page: 1,
        count: 3,
        records: 2,
      }),
    ]);
  });

  it('ends the walk at has_more false even beside a next_cursor, and logs that it did', async () => {
    const said = pageOf(
      [fullReview(1)],
      { count: 1, has_more: false, next_cursor: 'c9' },
      reviewSchema,
      WHERE,
    );
    expect(said).toMatchObject({ nextCursor: null, cursorIgnored: true });
    for (const next_cursor of [null, '', undefined]) {
      const page = pageOf([fullReview(1)], { count: 1, has_more: false, next_cursor }, reviewSchema, WHERE);
      expect(page.cursorIgnored).toBeUndefined();
    }
    const { log, lines } = capturingLog();
    const walked: Page<number>[] = [];
    const pages = [{ items: [1], nextCursor: null, receivedAt: new Date(), cursorIgnored: true as const }];
    for await (const page of paginate(async () => pages[0]!, null, { route: ROUTE, log })) walked.push(page);
    expect(walked).toHaveLength(1);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'partner API page says has_more false but sends a next_cursor: taken as the end of the walk (spec 4.3)',
        route: ROUTE,
        page: 1,
      }),
    ]);
  });
});

describe('the records of a page: null is an empty listing (Go marshals a nil slice as null)', () => {
  const end = { count: 0, has_more: false, next_cursor: null };

  it('reads reviews, locations and professionals null as no records', () => {
    expect(reviewPageSchema.parse({ reviews: null, pagination: end }).reviews).toEqual([]);
    expect(locationPageSchema.parse({ locations: null, pagination: end }).locations).toEqual([]);
    expect(professionalPageSchema.parse({ professionals: null, pagination: end }).professionals).toEqual([]);
  });

  it('still refuses records that are neither an array nor null, or absent', () => {
    for (const reviews of ['', 'none', {}, { 0: fullReview(1) }, 0, undefined]) {
      expect(reviewPageSchema.safeParse({ reviews, pagination: end }).success, JSON.stringify(reviews)).toBe(
        false,
      );
    }
    expect(locationPageSchema.safeParse({ locations: 'x', pagination: end }).success).toBe(false);
    expect(professionalPageSchema.safeParse({ professionals: {}, pagination: end }).success).toBe(false);
  });
});

describe('a review (spec 2.1): "string or null" fields absent, reviewer and professional null or absent', () => {
  const spelledOut = fullReview(7);

  it('reads every absent nullable field as null: the same review, stored the same', () => {
    const sparse = [
      without(spelledOut, 'comment'),
      { ...spelledOut, reviewer: {} },
      { ...spelledOut, reviewer: { name: null } },
      { ...spelledOut, reviewer: null },
      without(spelledOut, 'reviewer'),
      without(spelledOut, 'professional'),
      without(spelledOut, 'comment', 'reviewer', 'professional'),
    ];
    const expected = reviewSchema.parse(spelledOut);
    const observedAt = new Date('2026-11-27T00:00:00Z');
    for (const record of sparse) {
      const parsed = reviewSchema.parse(record);
      expect(toReviewRow(parsed, observedAt), JSON.stringify(record)).toEqual(
        toReviewRow(expected, observedAt),
      );
    }
  });

  it('reads a professional without id or name as one with them null, and keeps what was sent', () => {
    const row = (record: unknown) => toReviewRow(reviewSchema.parse(record), new Date(0));
    for (const professional of [{}, { name: null }]) {
      expect(row({ ...spelledOut, professional })).toMatchObject({
        professional_id: null,
        professional_name: null,
      });
    }
    expect(
      row({
        ...spelledOut,
        comment: 'Great',
        reviewer: { name: 'Ana', email: 'ana@example.test' },
        professional: { id: 'AAAAAAAA-0000-4000-8000-000000000001', name: 'Dr. B' },
      }),
    ).toMatchObject({
      comment: 'Great',
      reviewer_name: 'Ana',
      reviewer_email: 'ana@example.test',
      professional_id: 'aaaaaaaa-0000-4000-8000-000000000001',
      professional_name: 'Dr. B',
    });
    // Without an email key the name is still kept.
    expect(row({ ...spelledOut, reviewer: { name: 'Ana' } })).toMatchObject({
      reviewer_name: 'Ana',
      reviewer_email: null,
    });
  });

  it('still refuses a field of the wrong type, and the required fields absent', () => {
    const reason = (record: unknown) => reviewSchema.safeParse(record).error?.issues[0]?.path.join('.');
    expect(reason({ ...spelledOut, comment: 5 })).toBe('comment');
    expect(reason({ ...spelledOut, reviewer: 'Ana' })).toBe('reviewer');
    expect(reason({ ...spelledOut, reviewer: { name: 5 } })).toBe('reviewer.name');
    expect(reason({ ...spelledOut, professional: 'Dr. B' })).toBe('professional');
    expect(reason({ ...spelledOut, professional: { id: 'not-a-uuid' } })).toBe('professional.id');
    for (const key of ['id', 'review_number', 'created_at', 'rating', 'is_verified']) {
      expect(reason(without(spelledOut, key)), key).toBe(key);
    }
  });
});

describe('timestamps: basic-format and hour-only UTC offsets', () => {
  it('takes ±HHMM and ±HH, written as ±HH:MM: the same instant', () => {
    const cases: Array<[string, string]> = [
      ['2026-11-01T00:10:00+0000', '2026-11-01T00:10:00+00:00'],
      ['2026-11-01T00:10:00+00', '2026-11-01T00:10:00+00:00'],
      ['2026-11-01T00:10:00-0530', '2026-11-01T00:10:00-05:30'],
      ['2026-11-01T00:10:00.123-05', '2026-11-01T00:10:00.123-05:00'],
      ['2026-11-01T00:10:00+1559', '2026-11-01T00:10:00+15:59'],
      ['2026-11-01T00:10:00+05:30', '2026-11-01T00:10:00+05:30'],
      ['2026-11-01T00:10:00Z', '2026-11-01T00:10:00Z'],
    ];
    for (const [sent, kept] of cases) {
      expect(isoTimestamp.parse(sent), sent).toBe(kept);
      expect(Date.parse(kept), sent).toBe(
        Date.parse(sent.replace(/([+-]\d\d)(\d\d)?$/, (_, h, m) => `${h}:${m ?? '00'}`)),
      );
    }
    expect(new Date(isoTimestamp.parse('2026-11-01T00:10:00+0000')).toISOString()).toBe(
      '2026-11-01T00:10:00.000Z',
    );
    expect(new Date(isoTimestamp.parse('2026-11-01T05:40:00+0530')).toISOString()).toBe(
      '2026-11-01T00:10:00.000Z',
    );
  });

  it('still refuses what PostgreSQL cannot store, and offsets that are no offset', () => {
    const reasons = (value: string) => isoTimestamp.safeParse(value).error?.issues.map((i) => i.message);
    const unstorable =
      'must be a timestamp PostgreSQL can store (year 0001 or later, UTC offset within ±15:59)';
    for (const bad of ['2026-11-01T00:10:00+1600', '2026-11-01T00:10:00-16', '0000-01-01T00:00:00+0100']) {
      expect(reasons(bad), bad).toEqual([unstorable]);
    }
    for (const bad of [
      '2026-11-01T00:10:00+000',
      '2026-11-01T00:10:00+2400',
      '2026-11-01T00:10:00+0060',
      '2026-11-01T00:10:00+0',
      '2026-11-01T00:10:00',
      '2026-11-01T00:10+0000',
      '2026-11-01 00:10:00+0000',
    ]) {
      expect(reasons(bad), bad).toEqual(['must be an ISO 8601 timestamp']);
    }
  });

  it('gives newestCreatedAt the newest instant of a page mixing the forms', () => {
    const page = [
      '2026-11-01T00:10:00Z',
      '2026-11-01T02:30:00+0200', // 00:30 UTC: the newest
      '2026-11-01T00:20:00+00',
      '2026-10-31T20:00:00-0400', // 00:00 UTC
    ].map((at) => ({ created_at: isoTimestamp.parse(at) }));
    expect(newestCreatedAt(null, page)?.toISOString()).toBe('2026-11-01T00:30:00.000Z');
  });
});

/**
 * The whole walk over real HTTP, through the real client, into the mirror: a feed served in every
 * shape above at once. Every review must be stored, and stored as its spelled-out form would be.
 */
describe('a feed in every plausible shape, walked end to end', () => {
  const PAGE = 3;
  // Whole seconds, in the past (a watermark never passes "now").
  const newest = Math.floor(Date.now() / 1000) * 1000 - 10 * 60_000;
  const at = (minutesAgo: number) => new Date(newest - minutesAgo * 60_000);
  const iso = (minutesAgo: number) => at(minutesAgo).toISOString();
  /** `+0000`, PHP's DATE_ISO8601: the same instant as `iso`. */
  const php = (minutesAgo: number) => iso(minutesAgo).replace('.000Z', '+0000');
  const id = (i: number) => `10000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
  const base = (i: number, createdAt: string) => ({
    id: id(i),
    review_number: `R-${String(i).padStart(8, '0')}`,
    created_at: createdAt,
    rating: 4,
    is_verified: true,
  });
  // Newest first, as the feed sends it.
  const pages: Record<string, { reviews: unknown; pagination: Record<string, unknown> }> = {
    first: {
      reviews: [
        { ...base(1, php(1)), comment: 'php offset, no reviewer', reviewer: null },
        { ...base(2, iso(2).replace('.000Z', '+00')), professional: { name: 'Dr. B' } },
        { ...base(3, iso(3)), comment: null, reviewer: { name: 'Ana' }, professional: null },
      ],
      // No count at all.
      pagination: { has_more: true, next_cursor: 'p2' },
    },
    p2: {
      // Counted before a suppressed review was taken out: count 3, two sent.
      reviews: [base(4, iso(4)), { ...base(5, iso(5)), reviewer: {}, professional: {} }],
      pagination: { count: 3, has_more: true, next_cursor: 'p3' },
    },
    p3: {
      // Every review of this page was hidden, and Go sent the empty slice as null.
      reviews: null,
      pagination: { count: 0, has_more: true, next_cursor: 'p4' },
    },
    p4: {
      reviews: [{ ...base(6, php(6)), professional: { id: id(99).toUpperCase(), name: 'Dr. C' } }],
      // The last page: next_cursor "" (Go's zero value).
      pagination: { count: 1, has_more: false, next_cursor: '' },
    },
  };
  const location = (n: number) => ({
    id: n,
    slug: `loc-${n}`,
    name: `Location ${n}`,
    active: true,
    address: { line1: null, line2: null, city: null, state: null, zip: null },
    profile_url: `https://example.test/l/${n}`,
    default_survey_url: null,
    created_at: '2026-01-01T10:00:00+0000',
  });
  const fx = fakePlatformFixture(
    ({ path, query }) => {
      if (path === '/reviews') {
        const page = pages[query.get('cursor') ?? 'first'];
        return page === undefined
          ? { status: 404, body: { error: 'no such cursor' } }
          : { status: 200, body: page };
      }
      if (path === '/locations') {
        // Active: one location, next_cursor and count left out; inactive: none, sent as null.
        return query.get('active') === 'true'
          ? { status: 200, body: { locations: [location(1)], pagination: { has_more: false } } }
          : {
              status: 200,
              body: { locations: null, pagination: { count: 0, has_more: false, next_cursor: '' } },
            };
      }
      return { status: 404, body: { error: 'not found' } };
    },
    { pageSize: PAGE },
  );

  it('returns every review through the client, each read as its spelled-out form', async () => {
    const returned = [];
    for await (const page of fx.api.reviews.pages(null, null)) {
      expect(page.rejected ?? []).toEqual([]);
      returned.push(...page.items);
    }
    expect(returned.map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6].map(id));
    const rows = returned.map((r) => toReviewRow(r, new Date(0)));
    expect(rows[0]).toMatchObject({
      created_at: iso(1).replace('.000Z', '+00:00'),
      comment: 'php offset, no reviewer',
      reviewer_name: null,
      reviewer_email: null,
      professional_id: null,
      professional_name: null,
    });
    expect(rows[1]).toMatchObject({
      created_at: iso(2).replace('.000Z', '+00:00'),
      professional_id: null,
      professional_name: 'Dr. B',
    });
    expect(rows[2]).toMatchObject({ reviewer_name: 'Ana', reviewer_email: null });
    expect(rows[4]).toMatchObject({ reviewer_name: null, professional_id: null, professional_name: null });
    expect(rows[5]).toMatchObject({ professional_id: id(99), professional_name: 'Dr. C' });
  });

  it('stores every review of the walk and moves the watermark to the newest', async () => {
    await syncReviews(pullContext(fx.db, fx.api), {});
    const rows = await fx.db
      .knex(fx.db.table('reviews'))
      .orderBy('review_number')
      .select(
        'id',
        'created_at',
        'comment',
        'reviewer_name',
        'reviewer_email',
        'professional_id',
        'professional_name',
      );
    expect(rows.map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6].map(id));
    expect(rows.map((r) => new Date(r.created_at).toISOString())).toEqual([1, 2, 3, 4, 5, 6].map(iso));
    expect(rows[0]).toMatchObject({
      comment: 'php offset, no reviewer',
      reviewer_name: null,
      reviewer_email: null,
    });
    expect(rows[1]).toMatchObject({ comment: null, professional_id: null, professional_name: 'Dr. B' });
    expect(rows[2]).toMatchObject({ reviewer_name: 'Ana', reviewer_email: null });
    expect(rows[4]).toMatchObject({ reviewer_name: null, professional_id: null, professional_name: null });
    expect(rows[5]).toMatchObject({ professional_id: id(99), professional_name: 'Dr. C' });
    const quarantined = await fx.db.knex(fx.db.table('review_quarantine')).count({ n: '*' });
    expect(Number(quarantined[0]!.n)).toBe(0);
    const { watermark } = await readCheckpoint(fx.db.knex, fx.db, JOB.reviews);
    expect(watermark?.toISOString()).toBe(iso(1));
  });

  it("logs the count mismatch through the client's logger, and nothing fails", async () => {
    // The client (fx.api) logs with the quiet logger; this walk uses one that captures.
    const { log, lines } = capturingLog();
    const api = testApi({ url: fx.platform.url, apiKey: 'rm_test_key_123456' }, { pageSize: PAGE, log });
    try {
      let n = 0;
      for await (const page of api.reviews.pages(null, null)) n += page.items.length;
      expect(n).toBe(6);
    } finally {
      await api.close();
    }
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'partner API page count disagrees with its records',
        route: 'GET /reviews',
        page: 2,
        count: 3,
        records: 2,
      }),
    ]);
  });

  it('mirrors a directory listing without next_cursor or count, and one sent as null', async () => {
    await syncLocations(pullContext(fx.db, fx.api), {});
    const rows = await fx.db.knex(fx.db.table('locations')).select('id', 'created_at', 'removed_at');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: 1, removed_at: null });
    expect(new Date(rows[0].created_at).toISOString()).toBe('2026-01-01T10:00:00.000Z');
    expect(locationSchema.parse(location(1)).created_at).toBe('2026-01-01T10:00:00+00:00');
  });
});
