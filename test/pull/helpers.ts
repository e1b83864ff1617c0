import { expect } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { makePartnerApi, type PartnerApi, type PartnerApiOptions } from '../../src/partner-api/client.js';
import { type HttpClient, makeHttpClient } from '../../src/partner-api/http.js';
import type { PullContext } from '../../src/pull/context.js';
import { SandboxControl, type TruthReview } from '../../src/sandbox/controlClient.js';
import { startSandbox } from '../../src/sandbox/server.js';

export const quietLog = makeLogger({ level: 'silent', scrubber: new SecretScrubber() });

export type TestSandbox = Awaited<ReturnType<typeof startSandbox>> & { control: SandboxControl };

export async function testSandbox(options: Parameters<typeof startSandbox>[0] = {}): Promise<TestSandbox> {
  const sandbox = await startSandbox({ port: 0, ...options });
  return Object.assign(sandbox, { control: new SandboxControl(sandbox.url) });
}

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

/** The mirror's current (not removed) reviews, in the shape of the sandbox's truth. */
export async function mirroredReviews(db: Db) {
  const rows = await db.knex(db.table('reviews')).whereNull('removed_at').orderBy('id');
  return rows.map((r) => ({
    id: r.id as string,
    review_number: r.review_number as string,
    created_at: (r.created_at as Date).toISOString(),
    rating: Number(r.rating),
    comment: r.comment as string | null,
    is_verified: r.is_verified as boolean,
    reviewer: { name: r.reviewer_name as string | null, email: r.reviewer_email as string | null },
    professional: { id: r.professional_id as string | null, name: r.professional_name as string | null },
  }));
}

const truthShape = (r: TruthReview) => ({
  id: r.id,
  review_number: r.review_number,
  created_at: new Date(r.created_at).toISOString(),
  rating: r.rating,
  comment: r.comment,
  is_verified: r.is_verified,
  reviewer: r.reviewer,
  professional: r.professional,
});

/** Set equality of ids and field-by-field equality with what the sandbox's feed shows. */
export async function expectExactMirror(db: Db, sandbox: TestSandbox, companyId = sandbox.companyId) {
  const truth = (await sandbox.control.visibleReviews(companyId)).map(truthShape);
  truth.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const mirror = await mirroredReviews(db);
  expect(mirror.length).toBe(truth.length);
  // One assertion over the whole set would print 20,000 rows on failure; find the first difference.
  for (let i = 0; i < truth.length; i++) {
    if (JSON.stringify(mirror[i]) !== JSON.stringify(truth[i])) expect(mirror[i]).toEqual(truth[i]);
  }
  return truth.length;
}
