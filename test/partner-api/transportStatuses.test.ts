import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JOB } from '../../src/jobs/jobNames.js';
import { makeMetrics } from '../../src/metrics.js';
import { ApiRequestError, ApiUnavailableError } from '../../src/partner-api/errors.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { writeCheckpoint } from '../../src/pull/syncStateSql.js';
import { freshDb } from '../helpers/db.js';
import { fakePlatformFixture, feedReview, pullContext, testApi, testHttp } from '../pull/helpers.js';

/** A platform answering with whatever `handler` writes, over real HTTP; `n` counts from 1. */
async function platformOf(handler: (req: IncomingMessage, res: ServerResponse, n: number) => void) {
  let n = 0;
  const server = createServer((req, res) => handler(req, res, ++n));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const platform = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    apiKey: 'rm_test_key_123456',
    requests: () => n,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  closers.push(platform.close);
  return platform;
}
const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (closers.length > 0)
    await closers
      .pop()?.()
      .catch(() => {});
});

const onePage = JSON.stringify({
  reviews: [feedReview(1, Date.parse('2026-01-01T00:00:00Z'))],
  pagination: { count: 1, has_more: false, next_cursor: null },
});
const json = (res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(body);
};

describe('a 408 Request Timeout', () => {
  it('is sent again on a read, as the platform did not act on it', async () => {
    const platform = await platformOf((_req, res, n) =>
      n === 1 ? json(res, 408, 'Request Timeout') : json(res, 200, onePage),
    );
    const api = testApi(platform);
    closers.push(() => api.close());
    const page = await api.reviews.page({ since: null, cursor: null });
    expect(page.items).toHaveLength(1);
    expect(platform.requests()).toBe(2);
  });

  it('fails a read as unavailable (retryable), not as fatal, once the retries are spent', async () => {
    const platform = await platformOf((_req, res) => json(res, 408, 'Request Timeout'));
    const api = testApi(platform, {
      retry: { maxRetries: 2, budgetMs: 10_000, baseDelayMs: 1, maxDelayMs: 5 },
    });
    closers.push(() => api.close());
    const error = await api.reviews.page({ since: null, cursor: null }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiUnavailableError);
    expect(error).toMatchObject({ status: 408, outcomeUnknown: false });
    expect(platform.requests()).toBe(3);
  });

  it("is left to a POST's caller, not sent again by the transport", async () => {
    const platform = await platformOf((_req, res) => json(res, 408, '{"error":"Request Timeout"}'));
    const http = testHttp(platform);
    closers.push(() => http.close());
    const error = await http
      .request('POST', '/events', {
        body: { email: 'a@example.com', event_type: 'matter.closed' },
        schema: z.unknown(),
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiRequestError);
    expect(error).toMatchObject({ status: 408 });
    expect(platform.requests()).toBe(1);
  });

  describe('on the first page of a resumed walk', () => {
    const PAGE = 3;
    const start = Date.now() - 3_600_000;
    const feed = Array.from({ length: 9 }, (_, i) => feedReview(i, start - i * 60_000));
    const asked: Array<string | null> = [];
    let timeOutOnce = true;
    const fx = fakePlatformFixture(
      ({ query }) => {
        const cursor = query.get('cursor');
        asked.push(cursor);
        if (timeOutOnce && cursor === '6') {
          timeOutOnce = false;
          return { status: 408, body: 'Request Timeout' };
        }
        const offset = Number(cursor ?? 0);
        const page = feed.slice(offset, offset + PAGE);
        const hasMore = offset + PAGE < feed.length;
        const next = hasMore ? String(offset + PAGE) : null;
        return {
          status: 200,
          body: { reviews: page, pagination: { count: page.length, has_more: hasMore, next_cursor: next } },
        };
      },
      { pageSize: PAGE },
    );

    it('reads the checkpointed cursor again instead of starting over from the newest page', async () => {
      await writeCheckpoint(fx.db.knex, fx.db, JOB.reviews, {
        watermark: null,
        cursor: '6',
        walkSince: null,
        walkNewest: new Date(start),
        walkStartedAt: new Date(start + 60_000),
      });
      await syncReviews(pullContext(fx.db, fx.api), {});
      expect(asked).toEqual(['6', '6']);
    });
  });
});

describe('a redirect', () => {
  it('fails naming where it leads (without its query) and REVIEWS_API_URL, and is not followed', async () => {
    const platform = await platformOf((_req, res) => {
      res.writeHead(301, {
        location: 'https://platform.example/api/v1/partner/reviews?key=rm_test_key_123456',
      });
      res.end();
    });
    const api = testApi(platform);
    closers.push(() => api.close());
    const error = await api.reviews.page({ since: null, cursor: null }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiRequestError);
    expect((error as Error).message).toBe(
      "GET /reviews answered 301: redirected to https://platform.example/api/v1/partner/reviews, not followed: the platform's base URL (REVIEWS_API_URL) is redirected; set it to where it leads",
    );
    expect(platform.requests()).toBe(1);
  });
});

describe('closing the client', () => {
  it('does not wait out a key check after a 403 whose caller gave up', async () => {
    const platform = await platformOf((req, res) => {
      // The key check (a read of the feed since now) is never answered.
      if (new URL(req.url ?? '/', 'http://x').searchParams.has('since')) return;
      json(res, 403, '{"error":"forbidden"}');
    });
    // No timeout at all (API_REQUEST_TIMEOUT_SECONDS=0): only closing ends the check.
    const api = testApi(platform, { requestTimeoutMs: 0 });
    const stop = new AbortController();
    const read = api.reviews.page({ since: null, cursor: null }, stop.signal).catch((e: unknown) => e);
    while (platform.requests() < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    stop.abort(new Error('interrupted'));
    expect(await read).toMatchObject({ message: 'interrupted' });
    await api.close(); // before the fix: never returned
    expect(platform.requests()).toBe(2);
  });
});

describe('a Retry-After longer than the retries wait', () => {
  it("holds the client's requests of that route until it ends, and no longer, and no other route", async () => {
    let retryAfter = '600';
    const platform = await platformOf((req, res) =>
      req.url?.includes('/reviews')
        ? json(res, 429, '{"error":"slow down"}', { 'retry-after': retryAfter })
        : json(res, 200, '{"locations":[],"pagination":{"count":0,"has_more":false,"next_cursor":null}}'),
    );
    const metrics = makeMetrics();
    const db = await freshDb();
    closers.push(() => db.close());
    // The daemon's default retries: a budget of 120 s, shorter than the 10 minutes asked for.
    const retry = { maxRetries: 6, budgetMs: 120_000, baseDelayMs: 250, maxDelayMs: 15_000 };
    const api = testApi(platform, { retry, metrics });
    closers.push(() => api.close());
    const ctx = pullContext(db, api);

    const first = await syncReviews(ctx, {}).catch((e: unknown) => e);
    expect(first).toMatchObject({ status: 429, retryAfterOutlastsRetries: true });
    expect(platform.requests()).toBe(1);
    // The reviews job's next runs (every minute by default) and another route, well inside the wait.
    for (let run = 0; run < 2; run++) {
      const held = await syncReviews(ctx, {}).catch((e: unknown) => e);
      expect(held).toBeInstanceOf(ApiUnavailableError);
      expect(held).toMatchObject({ status: 429, outcomeUnknown: false, retryAfterOutlastsRetries: true });
      expect((held as ApiUnavailableError).retryAfterMs).toBeGreaterThan(590_000);
      expect((held as Error).message).toMatch(
        /^GET \/reviews not sent: the platform answered 429 with a Retry-After that ends in \d+ s$/,
      );
    }
    expect(platform.requests()).toBe(1);
    const held = (await metrics.apiRequests.get()).values.filter((v) => v.labels.status === 'held_off');
    expect(held).toEqual([
      expect.objectContaining({ labels: { route: 'GET /reviews', status: 'held_off' }, value: 2 }),
    ]);
    // Another part of the platform is asked as before.
    const listed = await api.locations.pages(true, null).next();
    expect(listed.value?.items).toEqual([]);
    expect(platform.requests()).toBe(2);

    // The hold ends with the wait: a client without retries, held by a Retry-After of 1 s.
    retryAfter = '1';
    const other = testApi(platform, { retry: { ...retry, maxRetries: 0 } });
    closers.push(() => other.close());
    await expect(other.reviews.page({ since: null, cursor: null })).rejects.toMatchObject({ status: 429 });
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await expect(other.reviews.page({ since: null, cursor: null })).rejects.toMatchObject({ status: 429 });
    expect(platform.requests()).toBe(4);
  });
});
