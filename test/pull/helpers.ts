import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { makePartnerApi, type PartnerApi, type PartnerApiOptions } from '../../src/partner-api/client.js';
import { type HttpClient, makeHttpClient } from '../../src/partner-api/http.js';
import type { PullContext } from '../../src/pull/context.js';
import { freshDb } from '../helpers/db.js';
import {
  type FakeAnswer,
  type FakePlatform,
  type FakeRequest,
  startFakePlatform,
} from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';

/** Review `i` of a feed a test serves, created `at` (ms), as the platform sends it (spec 2.1). */
export const feedReview = (i: number, at: number) => ({
  id: randomUUID(),
  review_number: `R-${i}`,
  created_at: new Date(at).toISOString(),
  rating: 4,
  comment: `review ${i}`,
  is_verified: true,
  reviewer: { name: null, email: null },
  professional: null,
});

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

export interface FakePlatformFixture {
  readonly platform: FakePlatform;
  readonly db: Db;
  readonly api: PartnerApi;
}

/**
 * For the describe block it is called in: a fake platform answering `answer` over real HTTP, a
 * fresh database, and a test client of the platform; all three closed after the block.
 */
export function fakePlatformFixture(
  answer: (req: FakeRequest) => FakeAnswer,
  over: Partial<PartnerApiOptions> = {},
): FakePlatformFixture {
  const fixture = {} as { platform: FakePlatform; db: Db; api: PartnerApi };
  beforeAll(async () => {
    fixture.platform = await startFakePlatform(answer);
    fixture.db = await freshDb();
    fixture.api = testApi({ url: fixture.platform.url, apiKey: 'rm_test_key_123456' }, over);
  });
  afterAll(async () => {
    await fixture.api?.close();
    await fixture.platform?.close();
    await fixture.db?.close();
  });
  return fixture;
}
