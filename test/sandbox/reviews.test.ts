import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { type Answer, partner } from './helpers.js';

type Call = ReturnType<typeof partner>;
interface WireReview {
  id: string;
  created_at: string;
  rating: number;
  comment: string | null;
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Feed order: created_at DESC, id DESC. */
function inFeedOrder(reviews: WireReview[]): boolean {
  return reviews.every((r, i) => {
    const prev = reviews[i - 1];
    if (prev === undefined) return true;
    return prev.created_at > r.created_at || (prev.created_at === r.created_at && prev.id > r.id);
  });
}

async function walk(call: Call, query: string, between?: () => Promise<void>) {
  const seen: WireReview[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const answer: Answer = await call('GET', `/reviews?${query}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(answer.status).toBe(200);
    seen.push(...answer.json.reviews);
    expect(answer.json.pagination.count).toBe(answer.json.reviews.length);
    expect(answer.json.pagination.has_more).toBe(answer.json.pagination.next_cursor !== null);
    cursor = answer.json.pagination.next_cursor;
    pages++;
    if (between && cursor) await between();
  } while (cursor);
  return { seen, pages };
}

describe('reviews feed', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let api: Call;

  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 10_000, seed: 42 });
    ({ control } = sandbox);
    api = partner(sandbox, sandbox.apiKey);
  });
  afterAll(() => sandbox.close());

  it('serves spec 2.1 reviews newest first with default limit 50', async () => {
    const answer = await api('GET', '/reviews');
    expect(answer.status).toBe(200);
    expect(answer.json.reviews).toHaveLength(50);
    expect(answer.json.pagination).toEqual({ count: 50, has_more: true, next_cursor: expect.any(String) });
    expect(inFeedOrder(answer.json.reviews)).toBe(true);
    for (const review of answer.json.reviews) {
      expect(Object.keys(review).sort()).toEqual(
        [
          'comment',
          'created_at',
          'id',
          'is_verified',
          'professional',
          'rating',
          'review_number',
          'reviewer',
        ].sort(),
      );
      expect(review.id).toMatch(UUID_V4);
      expect(review.review_number).toMatch(/^R-[0-9A-F]{8}$/);
      expect(review.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(review.rating).toBeGreaterThanOrEqual(1);
      expect(review.rating).toBeLessThanOrEqual(5);
      expect(Object.keys(review.reviewer).sort()).toEqual(['email', 'name']);
      expect(Object.keys(review.professional).sort()).toEqual(['id', 'name']);
    }
  });

  it('pages through 10,000 reviews while new ones are inserted, every pre-existing one exactly once', async () => {
    const truth = await control.visibleReviews(sandbox.companyId);
    const before = truth.map((r) => r.id);
    expect(before).toHaveLength(10_000);
    let inserted = 0;
    const { seen, pages } = await walk(api, 'limit=100', async () => {
      // New reviews land at the head, between already-read rows, at the page boundary's timestamp and in the tail.
      const middle = truth[(inserted * 37) % truth.length]!.created_at;
      await control.submitReviews(sandbox.companyId, [
        {},
        { created_at: middle },
        { created_at: '2001-01-01T00:00:00.000Z' },
      ]);
      inserted += 3;
    });
    expect(pages).toBeGreaterThanOrEqual(100);
    const ids = seen.map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    const seenSet = new Set(ids);
    expect(before.filter((id) => !seenSet.has(id))).toEqual([]);
    expect(inFeedOrder(seen)).toBe(true);
    expect(inserted).toBeGreaterThan(0);
    await control.reset();
  });

  it('applies since exclusively, keeps it across cursors, and refuses a different since', async () => {
    const truth = await control.visibleReviews(sandbox.companyId);
    const pivot = truth[250]!;
    const expected = truth.filter((r) => r.created_at > pivot.created_at).map((r) => r.id);
    const since = encodeURIComponent(pivot.created_at);
    const { seen } = await walk(api, `limit=100&since=${since}`);
    expect(seen.map((r) => r.id)).toEqual(expected);
    // The cursor remembers its since: the next page is the same with or without since repeated.
    const first = await api('GET', `/reviews?limit=100&since=${since}`);
    const cursor = first.json.pagination.next_cursor;
    const withSince = await api('GET', `/reviews?limit=100&since=${since}&cursor=${cursor}`);
    const without = await api('GET', `/reviews?limit=100&cursor=${cursor}`);
    expect(without.json).toEqual(withSince.json);
    const mismatched = await api('GET', `/reviews?limit=100&since=2020-01-01T00:00:00Z&cursor=${cursor}`);
    expect(mismatched.status).toBe(422);
    expect(mismatched.json.error).toMatch(/since/);
  });

  it('ends with has_more false and next_cursor null on the last page', async () => {
    const truth = await control.visibleReviews(sandbox.companyId);
    const pivot = truth[5]!.created_at;
    const newer = truth.filter((r) => r.created_at > pivot).length;
    const answer = await api('GET', `/reviews?limit=${newer}&since=${encodeURIComponent(pivot)}`);
    expect(answer.json.pagination).toEqual({ count: newer, has_more: false, next_cursor: null });
    const empty = await api('GET', '/reviews?since=2100-01-01T00:00:00Z');
    expect(empty.json).toEqual({ reviews: [], pagination: { count: 0, has_more: false, next_cursor: null } });
  });

  it('answers 422 with an error for invalid limit, since or cursor', async () => {
    for (const query of [
      'limit=0',
      'limit=101',
      'limit=abc',
      'limit=2.5',
      'limit=1&limit=2',
      'since=yesterday',
      'since=2024-01-01T00:00:00',
      'cursor=%%%',
      'cursor=eyJ2IjoyfQ',
      `cursor=${Buffer.from(JSON.stringify({ v: 1, k: 'locations', n: 1, a: true })).toString('base64url')}`,
    ]) {
      const answer = await api('GET', `/reviews?${query}`);
      expect(answer.status, query).toBe(422);
      expect(answer.json).toEqual({ error: expect.any(String) });
    }
    expect((await api('GET', '/reviews?limit=100')).json.reviews).toHaveLength(100);
    expect((await api('GET', '/reviews?limit=1')).json.reviews).toHaveLength(1);
  });

  it('shows only public, non-suppressed reviews, and suppression is reversible', async () => {
    const [visible, hidden, suppressed] = await control.submitReviews(sandbox.companyId, [
      { created_at: '2030-01-01T00:00:00.000Z', rating: 3.5, comment: 'Ünïcödé 🎉 "quoted"\nnew line' },
      { created_at: '2030-01-02T00:00:00.000Z', public: false },
      { created_at: '2030-01-03T00:00:00.000Z', suppressed: true, comment: null },
    ]);
    const head = async () => (await api('GET', '/reviews?limit=3')).json.reviews.map((r: WireReview) => r.id);
    expect(await head()).toEqual([visible!.id, ...(await head()).slice(1)]);
    expect(await head()).not.toContain(hidden!.id);
    expect(await head()).not.toContain(suppressed!.id);
    const first = (await api('GET', '/reviews?limit=1')).json.reviews[0];
    expect(first).toMatchObject({ rating: 3.5, comment: 'Ünïcödé 🎉 "quoted"\nnew line' });

    await control.unsuppress(suppressed!.id);
    expect((await head())[0]).toBe(suppressed!.id);
    await control.suppress(visible!.id);
    expect(await head()).not.toContain(visible!.id);
    const truth = await control.truth(sandbox.companyId);
    expect(truth.reviews.find((r) => r.id === hidden!.id)).toMatchObject({
      public: false,
      suppressed: false,
    });
    expect(truth.reviews.find((r) => r.id === visible!.id)).toMatchObject({ public: true, suppressed: true });
  });

  it('keeps comments byte-exact: nulls, NUL characters, emoji, quotes, newlines', async () => {
    const comments = [
      null,
      '',
      'a\u0000b',
      '👩‍👩‍👧 “smart” \'single\' "double"',
      'line1\r\nline2\ttab \\ backslash',
    ];
    const created = await control.submitReviews(
      sandbox.companyId,
      comments.map((comment, i) => ({ comment, created_at: `2031-01-0${i + 1}T00:00:00.000Z`, rating: 5 })),
    );
    const page = (await api('GET', `/reviews?limit=${comments.length}`)).json.reviews as WireReview[];
    expect(page.map((r) => r.comment).reverse()).toEqual(comments);
    expect(page.map((r) => r.id).reverse()).toEqual(created.map((r) => r.id));
  });
});
