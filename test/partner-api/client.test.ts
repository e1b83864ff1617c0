import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FatalError, RetryableError } from '../../src/errors.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import {
  ApiAuthError,
  ApiRequestError,
  ApiSchemaError,
  ApiUnavailableError,
} from '../../src/partner-api/errors.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi, testHttp } from '../pull/helpers.js';

describe('partner API client against the sandbox', () => {
  let sandbox: TestSandbox;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 250, seed: 3 });
    api = testApi(sandbox, { requestTimeoutMs: 300 });
  });
  afterAll(async () => {
    await api?.close();
    await sandbox?.close();
  });
  const requestsTo = async (route: string) => (await sandbox.control.requests()).by_route[route] ?? {};

  it('walks the feed page by page with the key, newest first', async () => {
    const ids: string[] = [];
    let pages = 0;
    for await (const page of api.reviews.pages(null, null)) {
      pages++;
      ids.push(...page.items.map((r) => r.id));
    }
    expect(pages).toBe(3);
    expect(new Set(ids).size).toBe(250);
    const truth = await sandbox.control.visibleReviews(sandbox.companyId);
    expect(ids).toEqual(truth.map((r) => r.id));
  });

  it('reports 401 at once, as fatal, without retrying and without the key', async () => {
    await sandbox.control.reset();
    const wrong = testApi({ url: sandbox.url, apiKey: 'rm_wrong_key_123456' });
    try {
      const error = await wrong.reviews.page({ since: null, cursor: null }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiAuthError);
      expect(error).toBeInstanceOf(FatalError);
      expect((error as Error).message).toBe(
        'the API key is missing, invalid or inactive (GET /reviews answered 401)',
      );
      expect((error as Error).message).not.toContain('rm_wrong');
      expect(await requestsTo('GET /api/v1/partner/reviews')).toEqual({ 401: 1 });
    } finally {
      await wrong.close();
    }
  });

  it('reports a deactivated key (403) the same way', async () => {
    const { api_key } = await sandbox.control.createCompany({});
    const inactive = testApi({ url: sandbox.url, apiKey: api_key });
    try {
      await sandbox.control.deactivateKey(api_key);
      await expect(inactive.reviews.page({ since: null, cursor: null })).rejects.toThrow(
        'the API key is missing, invalid or inactive (GET /reviews answered 403)',
      );
    } finally {
      await inactive.close();
    }
  });

  it("surfaces the platform's error text for 404 and 422", async () => {
    const missing = await api.professionals.get('no-such-slug').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ApiRequestError);
    expect((missing as ApiRequestError).status).toBe(404);
    expect((missing as Error).message).toBe('GET /professionals/:slug answered 404: Professional not found');
    const badCursor = await api.reviews
      .page({ since: null, cursor: 'not-a-cursor' })
      .catch((e: unknown) => e);
    expect((badCursor as Error).message).toBe('GET /reviews answered 422: invalid cursor');
  });

  it('retries 500, 429 (honouring Retry-After), hangs and truncated bodies, then succeeds', async () => {
    await sandbox.control.reset();
    const route = '/api/v1/partner/reviews';
    for (const fault of ['error500', 'error429', 'hang', 'truncated'] as const) {
      // Every request fails until the faults are lifted shortly after the first retry.
      await sandbox.control.setFaults({ partner: { [fault]: 1, retryAfterSeconds: 1, routes: [route] } });
      const started = Date.now();
      const pending = api.reviews.page({ since: null, cursor: null });
      await waitForRequest(sandbox, fault === 'hang' ? 'hang' : undefined);
      await sandbox.control.setFaults({});
      const page = await pending;
      expect(page.items.length).toBe(100);
      if (fault === 'error429') expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    }
    const statuses = await requestsTo('GET /api/v1/partner/reviews');
    expect(statuses).toMatchObject({
      500: expect.any(Number),
      429: expect.any(Number),
      hang: expect.any(Number),
    });
    expect(statuses['200']).toBeGreaterThanOrEqual(5); // four recoveries, one of them after a truncated 200
  });

  it('gives up after the retry limit with a retryable error naming the route', async () => {
    await sandbox.control.setFaults({ partner: { error500: 1 } });
    const limited = testApi(sandbox, {
      retry: { maxRetries: 2, budgetMs: 10_000, baseDelayMs: 1, maxDelayMs: 5 },
    });
    try {
      const error = await limited.reviews.page({ since: null, cursor: null }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiUnavailableError);
      expect(error).toBeInstanceOf(RetryableError);
      expect((error as Error).message).toBe('GET /reviews answered 500 (gave up after 2 retries)');
    } finally {
      await sandbox.control.setFaults({});
      await limited.close();
    }
  });

  it('rejects a body that breaks the contract, naming the route and the first offending field', async () => {
    await sandbox.control.submitReviews(sandbox.companyId, [{ rating: 4.5 }]);
    const strict = z.object({ reviews: z.array(z.object({ rating: z.string() })) });
    const http = testHttp(sandbox);
    const error = await http
      .request('GET', '/reviews', { schema: strict })
      .catch((e: unknown) => e)
      .finally(() => http.close());
    expect(error).toBeInstanceOf(ApiSchemaError);
    expect((error as ApiSchemaError).field).toBe('reviews[0].rating');
    expect((error as Error).message).toMatch(
      /^GET \/reviews returned an invalid body: reviews\[0\]\.rating: /,
    );
  });
});

/** Waits until the sandbox has answered (or, for `hang`, held) at least one partner request. */
async function waitForRequest(sandbox: TestSandbox, status?: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const counts = await sandbox.control.requests();
    const seen = Object.values(counts.by_route).some((byStatus) =>
      status === undefined ? Object.keys(byStatus).length > 0 : (byStatus[status] ?? 0) > 0,
    );
    if (seen) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the sandbox saw no request');
}
