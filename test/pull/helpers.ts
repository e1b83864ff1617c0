import type { Db } from '../../src/db/connect.js';
import { makePartnerApi, type PartnerApi, type PartnerApiOptions } from '../../src/partner-api/client.js';
import { type HttpClient, makeHttpClient } from '../../src/partner-api/http.js';
import type { PullContext } from '../../src/pull/context.js';
import { quietLog } from '../helpers/log.js';

/** A client with short timeouts and quick retries, so injected hangs cost little. */
export function testApi(
  sandbox: { url: string; apiKey: string },
  over: Partial<PartnerApiOptions> = {},
): PartnerApi {
  return makePartnerApi(testApiOptions(sandbox, over));
}

/** The bare transport with the same settings, for requests no resource module makes (test set-up). */
export function testHttp(
  sandbox: { url: string; apiKey: string },
  over: Partial<PartnerApiOptions> = {},
): HttpClient {
  return makeHttpClient(testApiOptions(sandbox, over));
}

const testApiOptions = (
  sandbox: { url: string; apiKey: string },
  over: Partial<PartnerApiOptions>,
): PartnerApiOptions => ({
  url: sandbox.url,
  key: sandbox.apiKey,
  connectTimeoutMs: 1_000,
  requestTimeoutMs: 2_000,
  retry: { maxRetries: 8, budgetMs: 30_000, baseDelayMs: 5, maxDelayMs: 50 },
  pageSize: 100,
  log: quietLog,
  ...over,
});

export const pullContext = (db: Db, api: PartnerApi, over: Partial<PullContext> = {}): PullContext => ({
  db,
  api,
  log: quietLog,
  overlapMs: 600_000,
  detailConcurrency: 4,
  ...over,
});
