import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ApiUnavailableError } from '../../src/partner-api/errors.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';

const REVIEWS = 'GET /api/v1/partner/reviews';

/**
 * The client against the sandbox's 429 in each form a platform writes its Retry-After: none (the
 * client's own backoff), delta-seconds, and an HTTP date, over real HTTP.
 */
describe("a 429's Retry-After, in each of its forms", () => {
  let sandbox: TestSandbox;
  // Retries that wait milliseconds and give up within 2 s: a wait of minutes outlasts them.
  const retry = { maxRetries: 3, budgetMs: 2_000, baseDelayMs: 1, maxDelayMs: 5 };

  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 5 });
  });
  afterEach(() => sandbox.control.reset());
  afterAll(() => sandbox.close());

  const readOnce = async () => {
    const api = testApi(sandbox, { retry });
    try {
      const first = await api.reviews.page({ since: null, cursor: null }).catch((e: unknown) => e);
      const second = await api.reviews.page({ since: null, cursor: null }).catch((e: unknown) => e);
      const sent = (await sandbox.control.requests()).by_route[REVIEWS]?.['429'] ?? 0;
      return { first, second, sent };
    } finally {
      await api.close();
    }
  };

  it('with none, retries with its own backoff as many times as allowed', async () => {
    await sandbox.control.setFaults({ partner: { error429: 1, retryAfterForm: 'absent' } });
    const { first, sent } = await readOnce();
    expect(first).toBeInstanceOf(ApiUnavailableError);
    expect(first).toMatchObject({ status: 429, retryAfterMs: undefined, retryAfterOutlastsRetries: false });
    expect((first as Error).message).toMatch(/\(gave up after 3 retries\)$/);
    // Two reads, each an attempt and three retries: no wait the platform asked for holds the second.
    expect(sent).toBe(8);
  });

  it.each([
    ['seconds', (ms: number) => expect(ms).toBe(600_000)],
    // An HTTP date counts from the client's clock: the wait left, within a second or two of 10 min.
    ['http-date', (ms: number) => expect(Math.abs(ms - 600_000)).toBeLessThanOrEqual(2_000)],
  ] as const)(
    'as %s, longer than the retries wait, gives up at once and holds the route',
    async (form, waits) => {
      await sandbox.control.setFaults({
        partner: { error429: 1, retryAfterSeconds: 600, retryAfterForm: form },
      });
      const { first, second, sent } = await readOnce();
      expect(first).toMatchObject({ status: 429, retryAfterOutlastsRetries: true });
      waits((first as ApiUnavailableError).retryAfterMs!);
      // The second read is not sent: the platform asked for ten minutes.
      expect(second).toMatchObject({ status: 429, outcomeUnknown: false, retryAfterOutlastsRetries: true });
      expect((second as Error).message).toMatch(/not sent: the platform answered 429 with a Retry-After/);
      expect(sent).toBe(1);
    },
  );
});
