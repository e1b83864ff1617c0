import { describe, expect, it } from 'vitest';
import { ContactIndex } from '../../src/sandbox/contactIndex.js';
import {
  CursorError,
  decodeListCursor,
  decodeReviewCursor,
  encodeListCursor,
  encodeReviewCursor,
} from '../../src/sandbox/cursor.js';
import { compareNewestFirst, NewestFirst } from '../../src/sandbox/keyset.js';
import { parseLimit, parseSince } from '../../src/sandbox/partnerRoutes.js';
import { makeRandom, reviewNumber, seededUuid } from '../../src/sandbox/random.js';
import { seededReviews } from '../../src/sandbox/seed.js';
import type { ContactRecord } from '../../src/sandbox/store.js';
import { Store, uniqueSlug } from '../../src/sandbox/store.js';
import { slugify } from '../../src/slugify.js';

describe('cursor codec', () => {
  it('round-trips a review position with its since', () => {
    const cursor = encodeReviewCursor({ createdMs: 1_700_000_000_123, id: 'abc' }, 1_600_000_000_000);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeReviewCursor(cursor)).toEqual({
      v: 1,
      k: 'reviews',
      t: 1_700_000_000_123,
      id: 'abc',
      s: 1_600_000_000_000,
    });
  });

  it('refuses garbage, tampered and foreign cursors', () => {
    for (const bad of ['', 'not a cursor!', 'abc', Buffer.from('{"v":2}').toString('base64url')]) {
      expect(() => decodeReviewCursor(bad)).toThrow(CursorError);
    }
    const list = encodeListCursor('locations', 3, true);
    expect(() => decodeReviewCursor(list)).toThrow(CursorError);
    expect(() => decodeListCursor(list, 'professionals')).toThrow(CursorError);
    expect(decodeListCursor(list, 'locations')).toMatchObject({ n: 3, a: true });
  });
});

describe('keyset order', () => {
  it('sorts created_at DESC then id DESC and binary-searches positions', () => {
    const items = [
      { createdMs: 1, id: 'a' },
      { createdMs: 3, id: 'a' },
      { createdMs: 2, id: 'b' },
      { createdMs: 2, id: 'c' },
      { createdMs: 2, id: 'a' },
    ];
    const set = new NewestFirst<(typeof items)[number]>();
    for (const item of items) set.insert(item);
    expect(set.items.map((i) => `${i.createdMs}${i.id}`)).toEqual(['3a', '2c', '2b', '2a', '1a']);
    expect(set.upperBound({ createdMs: 2, id: 'c' })).toBe(2);
    expect(set.upperBound({ createdMs: 2, id: 'bb' })).toBe(2);
    expect(set.notNewerThan(2)).toBe(1);
    expect(set.remove({ createdMs: 2, id: 'b' })).toBe(true);
    expect(set.remove({ createdMs: 2, id: 'b' })).toBe(false);
    const bulk = new NewestFirst<(typeof items)[number]>();
    bulk.addMany(items);
    expect([...bulk.items]).toEqual([...items].sort(compareNewestFirst).filter(() => true));
  });
});

describe('seeding', () => {
  const numbers = {
    nextReviewNumber: (() => {
      let n = 0;
      return () => n++;
    })(),
  };

  it('is deterministic per seed, company and index, with ties on created_at', () => {
    const a = seededReviews({ nextReviewNumber: () => 0 }, { id: 'c', ordinal: 0 }, 7, 0, 200);
    const b = seededReviews({ nextReviewNumber: () => 0 }, { id: 'c', ordinal: 0 }, 7, 0, 200);
    expect(b).toEqual(a);
    const other = seededReviews(numbers, { id: 'c', ordinal: 0 }, 8, 0, 200);
    expect(other[0]!.id).not.toBe(a[0]!.id);
    const continued = seededReviews(numbers, { id: 'c', ordinal: 0 }, 7, 100, 100);
    expect(continued.map((r) => r.id)).toEqual(a.slice(100).map((r) => r.id));
    expect(new Set(a.map((r) => r.createdMs)).size).toBeLessThan(200);
    expect(a.some((r) => !Number.isInteger(r.rating))).toBe(true);
    for (const r of a)
      expect(r.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('never gives two reviews of a company the same id, even at a million', () => {
    // Ids drawn from 32-bit seeds alone collided about sixty times in a million reviews.
    const reviews = seededReviews({ nextReviewNumber: () => 0 }, { id: 'c', ordinal: 0 }, 1, 0, 1_000_000);
    expect(new Set(reviews.map((r) => r.id)).size).toBe(1_000_000);
  });

  it('draws uuids and review numbers in the right shapes', () => {
    expect(seededUuid(makeRandom(1))).toBe(seededUuid(makeRandom(1)));
    const seen = new Set<string>();
    for (let n = 0; n < 10_000; n++) seen.add(reviewNumber(n));
    expect(seen.size).toBe(10_000);
    expect(reviewNumber(0)).toMatch(/^R-[0-9A-F]{8}$/);
  });
});

describe('store', () => {
  it('pages the visible feed with since exclusive', () => {
    const store = new Store({ surveyDelayMs: 0, seed: 1 });
    const { company } = store.createCompany();
    store.submitReviews(company.id, [
      { created_at: '2024-01-01T00:00:00.000Z' },
      { created_at: '2024-01-02T00:00:00.000Z' },
      { created_at: '2024-01-03T00:00:00.000Z', public: false },
      { created_at: '2024-01-04T00:00:00.000Z' },
    ]);
    const page = store.reviewPage(company, {
      limit: 10,
      after: null,
      sinceMs: Date.parse('2024-01-02T00:00:00Z'),
    });
    expect(page.reviews.map((r) => new Date(r.createdMs).toISOString().slice(0, 10))).toEqual(['2024-01-04']);
    expect(page.hasMore).toBe(false);
  });

  it('slugifies and de-duplicates', () => {
    expect(slugify('Café  Zoë & Co.', 'x')).toBe('cafe-zoe-co');
    expect(slugify('王', 'location')).toBe('location');
    expect(uniqueSlug('a', (s) => ['a', 'a-2'].includes(s))).toBe('a-3');
  });

  it('parses limit and since strictly', () => {
    expect(parseLimit(undefined)).toBe(50);
    expect(parseLimit('100')).toBe(100);
    for (const bad of ['0', '101', '1.5', '-1', 'ten', '']) expect(() => parseLimit(bad)).toThrow();
    expect(parseSince('2024-05-01T12:00:00Z')).toBe(Date.parse('2024-05-01T12:00:00Z'));
    expect(parseSince('2024-05-01T12:00:00.123+02:00')).toBe(Date.parse('2024-05-01T10:00:00.123Z'));
    for (const bad of ['yesterday', '2024-05-01T12:00:00', '2024-13-45T00:00:00Z', '']) {
      expect(() => parseSince(bad)).toThrow();
    }
  });
});

describe('ContactIndex', () => {
  const contact = (id: string, email: string, externalId: string | null): ContactRecord => ({
    id,
    email,
    externalId,
    name: null,
    professionalId: null,
    createdMs: 0,
    updatedMs: 0,
  });

  it('finds contacts by id, external_id and case-insensitive email, the earliest created first', () => {
    const index = new ContactIndex();
    const a = contact('a', 'Ann@Example.com', 'crm-1');
    const b = contact('b', 'bob@example.com', null);
    index.add(a);
    index.add(b);
    expect(index.byId('b')).toBe(b);
    expect(index.byExternalId('crm-1')).toBe(a);
    expect(index.byEmail('ann@example.COM')).toBe(a);
    // b takes a's email: a, created first, is still the one an email lookup finds.
    index.update(b, { email: 'ann@example.com', externalId: 'crm-2' });
    expect(index.byEmail('ann@example.com')).toBe(a);
    expect(index.byExternalId('crm-2')).toBe(b);
    expect(index.byEmail('bob@example.com')).toBeUndefined();
    index.update(a, { email: 'new@example.com', externalId: 'crm-1' });
    expect(index.byEmail('ann@example.com')).toBe(b);
    expect(index.all).toEqual([a, b]);
  });
});
