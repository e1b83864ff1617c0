import { describe, expect, it } from 'vitest';
import { canonicalReview } from '../../src/partner-api/canonicalReview.js';
import { reviewRecord, reviewSchema } from '../../src/partner-api/reviewsSchema.js';
import { makeRandom } from '../../src/sandbox/random.js';
import { seededReviews } from '../../src/sandbox/seed.js';
import { reviewJson } from '../../src/sandbox/store.js';

const ABSENT = Symbol('absent');
const LOWER = '0f8e2a4c-1b3d-4e5f-8a9b-0c1d2e3f4a5b';
const UPPER = LOWER.toUpperCase();

/** Values each field may take: the spec's, and every near miss a platform could plausibly send. */
const VALUES: Record<string, readonly unknown[]> = {
  id: [
    LOWER,
    UPPER,
    `${LOWER.slice(0, 9)}${UPPER.slice(9)}`,
    LOWER.slice(1),
    ` ${LOWER}`,
    'g'.repeat(36),
    '',
    null,
    7,
    ABSENT,
  ],
  review_number: [
    'R-1',
    '',
    'x'.repeat(500),
    'x'.repeat(501),
    '😀'.repeat(250),
    '😀'.repeat(251),
    null,
    5,
    ABSENT,
  ],
  created_at: [
    '2026-01-01T00:00:00Z',
    '2026-01-01T00:00:00.123456789Z',
    '2024-02-29T12:00:00Z',
    '2023-02-29T12:00:00Z',
    '2100-02-29T12:00:00Z',
    '2000-02-29T12:00:00Z',
    '2026-04-31T00:00:00Z',
    '0000-01-01T00:00:00Z',
    '0001-01-01T00:00:00Z',
    '9999-12-31T23:59:59.999Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T00:00:60Z',
    '2026-01-01T00:00Z',
    '2026-01-01T00:00:00.Z',
    '2026-01-01T00:00:00z',
    '2026-01-01 00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-01-01T00:00:00+00:00',
    '2026-01-01T00:00:00+0000',
    '2026-01-01T00:00:00+02',
    '2026-01-01T00:00:00-16:00',
    '2026-01-01T00:00:00',
    '2026-01-01',
    null,
    1_767_225_600,
    ABSENT,
  ],
  rating: [0, 5, 4.5, 3, -0, -0.0001, 5.0001, Number.NaN, Number.POSITIVE_INFINITY, '5', null, ABSENT],
  comment: ['Great service', '', null, 1, {}, ABSENT],
  is_verified: [true, false, 'true', 0, null, ABSENT],
  reviewer: [
    { name: 'Ann', email: 'ann@example.com' },
    { name: null, email: null },
    { name: 'Ann', email: 'ann@example.com', phone: '555' },
    { name: 'Ann' },
    {},
    { name: 1, email: null },
    [],
    'Ann',
    null,
    ABSENT,
  ],
  professional: [
    { id: LOWER, name: 'Dr Who' },
    { id: null, name: null },
    { id: LOWER, name: 'Dr Who', slug: 'dr-who' },
    { id: UPPER, name: 'Dr Who' },
    { id: 'not-a-uuid', name: 'Dr Who' },
    { id: LOWER },
    {},
    [],
    null,
    ABSENT,
  ],
};

const BASE = {
  id: LOWER,
  review_number: 'R-1',
  created_at: '2026-01-01T00:00:00Z',
  rating: 4,
  comment: 'Great service',
  is_verified: true,
  reviewer: { name: 'Ann', email: 'ann@example.com' },
  professional: { id: LOWER, name: 'Dr Who' },
  extra_field: 'added by a newer platform',
};

const withField = (record: Record<string, unknown>, field: string, value: unknown) => {
  const copy = { ...record };
  if (value === ABSENT) delete copy[field];
  else copy[field] = value;
  return copy;
};

/** What canonicalReview must answer for `raw`: reviewSchema's output, or nothing. */
const expectSubsetOfSchema = (raw: unknown) => {
  const fast = canonicalReview(raw);
  if (fast === undefined) return false;
  const parsed = reviewSchema.safeParse(raw);
  expect(parsed.success, JSON.stringify(raw)).toBe(true);
  expect(fast, JSON.stringify(raw)).toStrictEqual(parsed.data);
  return true;
};

describe('canonicalReview', () => {
  it('takes every review the sandbox serves, as reviewSchema reads it', () => {
    let n = 0;
    const served = seededReviews({ nextReviewNumber: () => ++n }, { id: 'c', ordinal: 1 }, 7, 0, 2_000)
      .map(reviewJson)
      .map((review) => JSON.parse(JSON.stringify(review)) as unknown);
    expect(served.filter(expectSubsetOfSchema)).toHaveLength(served.length);
  });

  it('answers as reviewSchema does for every field set to every near miss, or leaves the review to it', () => {
    let taken = 0;
    let left = 0;
    for (const [field, values] of Object.entries(VALUES)) {
      for (const value of values) {
        if (expectSubsetOfSchema(withField(BASE, field, value))) taken++;
        else left++;
      }
    }
    // Both branches ran: the near misses are not all taken, nor all left.
    expect(taken).toBeGreaterThan(20);
    expect(left).toBeGreaterThan(50);
  });

  it('answers as reviewSchema does for random mixes of them (pairs and more at once)', () => {
    const random = makeRandom(15);
    const fields = Object.entries(VALUES);
    for (let i = 0; i < 20_000; i++) {
      let record: Record<string, unknown> = BASE;
      for (const [field, values] of fields) {
        if (random() < 0.3) record = withField(record, field, values[Math.floor(random() * values.length)]);
      }
      expectSubsetOfSchema(record);
    }
  });

  it('leaves whatever is not an object to reviewSchema', () => {
    for (const raw of [null, undefined, 'review', 4, true, [], [BASE]]) {
      expect(canonicalReview(raw)).toBeUndefined();
    }
  });

  it('reads a page record as reviewSchema does, its reasons for a refusal included', () => {
    for (const raw of [BASE, withField(BASE, 'id', UPPER), withField(BASE, 'rating', 6), null]) {
      expect(reviewRecord.safeParse(raw)).toStrictEqual(reviewSchema.safeParse(raw));
    }
  });
});
