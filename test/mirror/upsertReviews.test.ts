import { setImmediate } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { isUniqueViolation } from '../../src/db/dataError.js';
import { latestPerId, type ReviewRow, toReviewRow } from '../../src/mirror/reviewRow.js';
import { copyNewReviews, upsertReviews } from '../../src/mirror/reviewsSql.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';

const row = (over: Partial<ReviewRow> = {}): ReviewRow => ({
  id: '6f1c2a5e-8a7b-4c1d-9e2f-0a1b2c3d4e5f',
  review_number: 'R-0A1B2C3D',
  created_at: '2026-11-01T10:00:00.000Z',
  rating: 4.5,
  comment: 'Très bien 👍 "quoted"\nsecond line',
  is_verified: true,
  reviewer_name: 'Zoë',
  reviewer_email: null,
  professional_id: null,
  professional_name: null,
  observed_at: new Date('2026-11-01T10:00:05.000Z'),
  ...over,
});

/**
 * Rows of one page share one Date, a batch of webhook deliveries has one per row; texts with
 * what array literals and COPY must escape, and nulls.
 */
const mixedBatch = (idPrefix: string): ReviewRow[] => {
  const page = new Date('2026-11-02T08:00:00.000Z');
  return [
    row({ id: `${idPrefix}-0000-4000-8000-000000000001`, observed_at: page, rating: 1, is_verified: false }),
    row({
      id: `${idPrefix}-0000-4000-8000-000000000002`,
      observed_at: page,
      comment: 'back\\slash, {braces}, NULL, \\N, tab\there',
      reviewer_email: 'a@example.com',
      professional_id: '2c2c2c2c-0000-4000-8000-000000000002',
      professional_name: 'Dr "Q"\r\n',
    }),
    row({
      id: `${idPrefix}-0000-4000-8000-000000000003`,
      observed_at: new Date(page.getTime() + 1),
      comment: null,
    }),
  ];
};

// biome-ignore lint/suspicious/noExplicitAny: a row as the driver returns it.
const storedColumns = (stored: any) => ({
  review_number: stored.review_number,
  created_at: stored.created_at.toISOString(),
  rating: Number(stored.rating),
  comment: stored.comment,
  is_verified: stored.is_verified,
  reviewer_name: stored.reviewer_name,
  reviewer_email: stored.reviewer_email,
  professional_id: stored.professional_id,
  professional_name: stored.professional_name,
  observed_at: stored.observed_at.toISOString(),
});

const asStored = (row: ReviewRow) => ({ ...row, id: undefined, observed_at: row.observed_at.toISOString() });

describe('latestPerId', () => {
  it('keeps the most recently observed version of each id', () => {
    const older = row({ comment: 'old', observed_at: new Date(1000) });
    const newer = row({ comment: 'new', observed_at: new Date(2000) });
    expect(latestPerId([newer, older]).map((r) => r.comment)).toEqual(['new']);
    expect(latestPerId([older, newer]).map((r) => r.comment)).toEqual(['new']);
  });
});

describe('toReviewRow', () => {
  it('flattens a review and makes NUL characters storable without dropping the review', () => {
    const observedAt = new Date();
    const flat = toReviewRow(
      {
        id: row().id,
        review_number: 'R-0A1B2C3D',
        created_at: '2026-11-01T10:00:00.000Z',
        rating: 5,
        comment: 'a\u0000b',
        is_verified: false,
        reviewer: { name: 'N\u0000', email: null },
        professional: null,
      },
      observedAt,
    );
    expect(flat).toMatchObject({
      comment: 'a\uFFFDb',
      reviewer_name: 'N\uFFFD',
      reviewer_email: null,
      professional_id: null,
      professional_name: null,
      observed_at: observedAt,
    });
  });
});

describe('upsertReviews', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => db?.close());

  const read = async (id: string) => db.knex(db.table('reviews')).where({ id }).first();

  it('inserts, then counts a second sighting as an update, keeping the first source', async () => {
    expect(await upsertReviews(db.knex, db, [row()], 'webhook')).toEqual({ inserted: 1, updated: 0 });
    const first = await read(row().id);
    expect(first.source).toBe('webhook');
    expect(first.feed_seen_at).toBeNull();
    expect(String(first.rating)).toBe('4.5');
    expect(first.comment).toBe(row().comment);

    expect(await upsertReviews(db.knex, db, [row()], 'feed')).toEqual({ inserted: 0, updated: 1 });
    const second = await read(row().id);
    expect(second.source).toBe('webhook');
    expect(second.feed_seen_at).not.toBeNull();
  });

  it('stores every column of every row of a batch as given, each with its own observed_at', async () => {
    const rows = mixedBatch('1b1b1b1b');
    expect(await upsertReviews(db.knex, db, rows, 'feed')).toEqual({ inserted: 3, updated: 0 });
    for (const expected of rows) expect(storedColumns(await read(expected.id))).toEqual(asStored(expected));
  });

  it('never lets an older version overwrite a newer one, but still records the sighting', async () => {
    const id = '0e5d7c3b-1111-4222-8333-944455556666';
    await upsertReviews(db.knex, db, [row({ id, comment: 'newer', observed_at: new Date(5000) })], 'webhook');
    const before = await read(id);
    await upsertReviews(db.knex, db, [row({ id, comment: 'older', observed_at: new Date(1000) })], 'webhook');
    const after = await read(id);
    expect(after.comment).toBe('newer');
    expect(after.last_seen_at.getTime()).toBeGreaterThanOrEqual(before.last_seen_at.getTime());
  });

  it('accepts the same id twice in one batch and clears removed_at when the feed shows a row again', async () => {
    const table = db.table('reviews');
    const id = '7a7a7a7a-2222-4333-8444-955566667777';
    await upsertReviews(db.knex, db, [row({ id }), row({ id, comment: 'dup' })], 'feed');
    await db.knex(table).where({ id }).update({ removed_at: new Date() });
    await upsertReviews(db.knex, db, [row({ id })], 'feed');
    expect((await read(id)).removed_at).toBeNull();
  });
});

describe('copyNewReviews (on a PostgreSQL server)', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb({ url: POSTGRES_URL });
  });
  afterAll(async () => db?.close());

  const read = async (id: string) => db.knex(db.table('reviews')).where({ id }).first();

  it('inserts every column of every row as the upsert from the feed would', async () => {
    const rows = mixedBatch('3d3d3d3d');
    expect(await db.knex.transaction((trx) => copyNewReviews(trx, db, [rows]))).toBe(3);
    for (const expected of rows) {
      const stored = await read(expected.id);
      expect(storedColumns(stored)).toEqual(asStored(expected));
      expect(stored.source).toBe('feed');
      expect(stored.removed_at).toBeNull();
      // All three are the transaction's time, as the upsert's now() would make them.
      expect(stored.feed_seen_at).toEqual(stored.first_seen_at);
      expect(stored.last_seen_at).toEqual(stored.first_seen_at);
    }
  });

  it('refuses a group holding a stored review, storing none of the group', async () => {
    const stored = row({ id: '4e4e4e4e-0000-4000-8000-000000000001' });
    const fresh = row({ id: '4e4e4e4e-0000-4000-8000-000000000002' });
    await upsertReviews(db.knex, db, [stored], 'webhook');
    const refused = await db.knex
      .transaction((trx) => copyNewReviews(trx, db, [[fresh], [stored]]))
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(isUniqueViolation(refused)).toBe(true);
    expect(await read(fresh.id)).toBeUndefined();
    expect((await read(stored.id)).source).toBe('webhook');
  });

  /** Reviews stored whose id begins with `prefix` (each test below writes ids of its own). */
  const storedWithPrefix = async (prefix: string) =>
    Number(
      (
        await db
          .knex(db.table('reviews'))
          .whereRaw('id::text like ?', [`${prefix}-%`])
          .count({ n: '*' })
      )[0]?.n,
    );

  const pageOf = (group: number, page: number): ReviewRow[] =>
    Array.from({ length: 100 }, (_, i) =>
      row({
        id: `5f5f${String(group).padStart(4, '0')}-0000-4000-8000-${String(page * 100 + i).padStart(12, '0')}`,
        comment: 'x'.repeat(500),
      }),
    );

  it('stores a group that arrives page by page', async () => {
    let produced = 0;
    async function* pages() {
      for (let page = 0; page < 200; page++) {
        produced++;
        yield pageOf(1, page);
      }
    }
    expect(await db.knex.transaction((trx) => copyNewReviews(trx, db, pages()))).toBe(20_000);
    expect(produced).toBe(200);
    expect(await storedWithPrefix('5f5f0001')).toBe(20_000);
  });

  it('ends the COPY when the pages stop with an error, so the transaction rolls back and the connection serves on', async () => {
    async function* pages() {
      yield pageOf(3, 0);
      await setImmediate();
      throw new Error('the walk stopped');
    }
    const failure = await db.knex
      .transaction((trx) => copyNewReviews(trx, db, pages()))
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect((failure as Error).message).toBe('the walk stopped');
    expect(await storedWithPrefix('5f5f0003')).toBe(0);
  });

  it('stops taking pages once the server refused one, and stores none of the group', async () => {
    const stored = pageOf(2, 1)[0]!;
    await upsertReviews(db.knex, db, [stored], 'webhook');
    let produced = 0;
    // Endless, each page from the event loop as from the network: only the refusal ends the group.
    async function* pages() {
      for (let page = 0; ; page++) {
        produced++;
        yield pageOf(2, page);
        await setImmediate();
      }
    }
    const refused = await db.knex
      .transaction((trx) => copyNewReviews(trx, db, pages()))
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(isUniqueViolation(refused)).toBe(true);
    expect(produced).toBeLessThan(10_000);
    expect(await storedWithPrefix('5f5f0002')).toBe(1);
  });
});
