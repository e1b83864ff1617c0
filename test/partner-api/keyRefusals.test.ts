import { describe, expect, it } from 'vitest';
import { makeMetrics } from '../../src/metrics.js';
import { ApiAuthError, ApiRequestError } from '../../src/partner-api/errors.js';
import { fakePlatformFixture, testApi } from '../pull/helpers.js';

/**
 * `review_mirror_api_key_refusals_total` pages an operator (ReviewMirrorApiKeyRejected): it counts
 * the answers that refuse the key itself, never a 403 of one record while the key is accepted,
 * which `review_mirror_api_requests_total` counts all the same.
 */
describe('the API key refusals counter', () => {
  let keyRefused = false;
  const fx = fakePlatformFixture(({ path }) => {
    if (path === '/reviews') {
      return keyRefused
        ? { status: 401, body: { error: 'invalid key' } }
        : {
            status: 200,
            body: { reviews: [], pagination: { count: 0, has_more: false, next_cursor: null } },
          };
    }
    return { status: 403, body: { error: 'this professional is locked' } };
  });

  it('counts a 401, and a 403 only when the key is refused too', async () => {
    const metrics = makeMetrics();
    const api = testApi({ url: fx.platform.url, apiKey: 'rm_test_key_123456' }, { metrics });
    const refusals = async () => (await metrics.apiKeyRefusals.get()).values[0]?.value;
    const forbidden = async () =>
      (await metrics.apiRequests.get()).values.find((v) => v.labels.status === '403')?.value;
    try {
      expect(await refusals()).toBe(0);
      // One record refused while the key is accepted: that record's failure.
      await expect(api.professionals.get('locked')).rejects.toBeInstanceOf(ApiRequestError);
      expect(await forbidden()).toBe(1);
      expect(await refusals()).toBe(0);

      keyRefused = true;
      await expect(api.reviews.page({ since: null, cursor: null })).rejects.toBeInstanceOf(ApiAuthError);
      expect(await refusals()).toBe(1);
    } finally {
      await api.close();
    }
  });
});
