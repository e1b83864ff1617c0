import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { partner } from './helpers.js';

type Call = ReturnType<typeof partner>;

/** The faults a hostile or broken platform shows (issue 9): poison records, lying pagination, echoed keys. */
describe('a broken review feed', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let api: Call;

  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 250 });
    control = sandbox.control;
    api = partner(sandbox, sandbox.apiKey);
  });
  afterEach(() => control.setFaults({}));
  afterAll(() => sandbox.close());

  const walk = async (limit: number, maxPages = 20) => {
    const pages: Array<{ ids: string[]; has_more: boolean; next_cursor: string | null; cursor: string }> = [];
    let cursor = '';
    while (pages.length < maxPages) {
      const answer = await api('GET', `/reviews?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
      expect(answer.status).toBe(200);
      const { has_more, next_cursor } = answer.json.pagination;
      pages.push({
        ids: answer.json.reviews.map((r: { id?: string }) => r.id),
        has_more,
        next_cursor,
        cursor,
      });
      if (!has_more || next_cursor === null) break;
      cursor = next_cursor;
    }
    return pages;
  };

  describe('invalidReviews', () => {
    it('serves the listed ids broken, in the shape asked for, on every read, and the rest intact', async () => {
      const visible = await control.visibleReviews(sandbox.companyId);
      const poisoned = [visible[3]!.id, visible[120]!.id];
      for (const [shape, check] of [
        ['rating', (r: Record<string, unknown>) => expect(r.rating).toBe(7)],
        ['created_at', (r: Record<string, unknown>) => expect(r.created_at).toBe('not-a-date')],
      ] as const) {
        await control.setFaults({ partner: { invalidReviews: poisoned, invalidReviewShape: shape } });
        for (let read = 0; read < 2; read++) {
          const page = (await api('GET', '/reviews?limit=5')).json;
          expect(page.reviews).toHaveLength(5);
          check(page.reviews[3]);
          expect(page.reviews[3].id).toBe(poisoned[0]);
          expect(page.reviews[2]).toEqual(
            expect.objectContaining({ id: visible[2]!.id, rating: visible[2]!.rating }),
          );
        }
      }
      await control.setFaults({ partner: { invalidReviews: poisoned, invalidReviewShape: 'missing_id' } });
      const page = (await api('GET', '/reviews?limit=5')).json;
      expect(page.reviews[3]).not.toHaveProperty('id');
      expect(page.reviews[3].review_number).toBe(visible[3]!.review_number);
      // The cursor still names the true position: the walk continues past the broken record.
      expect(page.pagination.has_more).toBe(true);
      const truth = await control.truth(sandbox.companyId);
      expect(truth.reviews.find((r) => r.id === poisoned[0])?.rating).toBe(visible[3]!.rating);
    });

    it('breaks a seeded fraction of the reviews, each in a shape chosen by its id', async () => {
      await control.setFaults({ partner: { invalidReviews: 0.2 } });
      const first = (await api('GET', '/reviews?limit=100')).json.reviews as Array<Record<string, unknown>>;
      const again = (await api('GET', '/reviews?limit=100')).json.reviews;
      expect(again).toEqual(first);
      const shapes = first.map((r) =>
        r.rating === 7
          ? 'rating'
          : r.created_at === 'not-a-date'
            ? 'created_at'
            : !('id' in r)
              ? 'missing_id'
              : 'ok',
      );
      const broken = shapes.filter((s) => s !== 'ok').length;
      expect(broken).toBeGreaterThan(8);
      expect(broken).toBeLessThan(35);
      expect(new Set(shapes)).toEqual(new Set(['ok', 'rating', 'created_at', 'missing_id']));
    });
  });

  describe('pagination', () => {
    it('nullCursorAfterPages: that page says has_more with a null cursor', async () => {
      await control.setFaults({ partner: { pagination: { nullCursorAfterPages: 2 } } });
      const pages = await walk(50);
      expect(pages).toHaveLength(3);
      expect(pages[2]).toMatchObject({ has_more: true, next_cursor: null });
      expect(pages.flatMap((p) => p.ids)).toHaveLength(150);
      await control.setFaults({ partner: { pagination: { nullCursorAfterPages: 0 } } });
      expect(await walk(100)).toMatchObject([{ has_more: true, next_cursor: null }]);
    });

    it('repeatCursorAfterPages: that page answers with the cursor it was asked with, for ever', async () => {
      await control.setFaults({ partner: { pagination: { repeatCursorAfterPages: 2 } } });
      const pages = await walk(40, 8);
      expect(pages).toHaveLength(8);
      expect(pages[2]!.next_cursor).toBe(pages[2]!.cursor);
      for (const page of pages.slice(3)) {
        expect(page.cursor).toBe(pages[2]!.cursor);
        expect(page.ids).toEqual(pages[2]!.ids);
        expect(page.has_more).toBe(true);
      }
    });

    it('identicalPagesAfterPages: the same reviews under a fresh cursor each time', async () => {
      await control.setFaults({ partner: { pagination: { identicalPagesAfterPages: 1 } } });
      const pages = await walk(30, 6);
      expect(pages).toHaveLength(6);
      expect(new Set(pages.map((p) => p.cursor)).size).toBe(6);
      for (const page of pages.slice(2)) expect(page.ids).toEqual(pages[1]!.ids);
      expect(pages[1]!.ids).not.toEqual(pages[0]!.ids);
    });

    it('refuses two pagination faults at once, and a repeat from page 0', async () => {
      for (const pagination of [
        { nullCursorAfterPages: 1, repeatCursorAfterPages: 1 },
        { repeatCursorAfterPages: 0 },
      ]) {
        const response = await fetch(`${sandbox.url}/_sandbox/faults`, {
          method: 'PUT',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ partner: { pagination } }),
        });
        expect(response.status, JSON.stringify(pagination)).toBe(422);
      }
    });

    it('leaves a walk whole once cleared', async () => {
      const pages = await walk(100);
      expect(pages.flatMap((p) => p.ids)).toHaveLength(250);
      expect(pages.at(-1)).toMatchObject({ has_more: false, next_cursor: null });
    });
  });

  describe('echoKey', () => {
    it('answers 400 with the key quoted in the error body', async () => {
      await control.setFaults({ partner: { echoKey: true } });
      const answer = await api('GET', '/reviews?limit=1');
      expect(answer.status).toBe(400);
      expect(answer.json).toEqual({ error: `unknown parameter for api key ${sandbox.apiKey}` });
    });

    it('quotes the key in 500 and 429 bodies too, and only on the routes given', async () => {
      await control.setFaults({ partner: { echoKey: true, error500: 1 } });
      const failed = await api('GET', '/locations');
      expect(failed.status).toBe(500);
      expect(failed.json.error).toContain(sandbox.apiKey);
      await control.setFaults({ partner: { echoKey: true, error429: 1 } });
      const limited = await api('GET', '/reviews');
      expect(limited.status).toBe(429);
      expect(limited.json.error).toContain(sandbox.apiKey);
      await control.setFaults({ partner: { echoKey: true, routes: ['/api/v1/partner/locations'] } });
      expect((await api('GET', '/reviews?limit=1')).status).toBe(200);
      expect((await api('GET', '/locations')).status).toBe(400);
    });
  });
});
