import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { runJob } from '../../src/jobs/runner.js';
import { ApiAuthError } from '../../src/partner-api/errors.js';
import { reconcileReviews } from '../../src/pull/reconcileReviews.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { expectExactMirror } from '../helpers/oracle.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { pullContext, testApi } from './helpers.js';

describe('sync under injected faults', () => {
  let sandbox: TestSandbox;
  let db: Db;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 5_000, seed: 9 });
    db = await freshDb();
  });
  afterAll(async () => {
    await db?.close();
    await sandbox?.close();
  });

  it('ends with an exact mirror despite 20% 500s, 10% 429s, hangs and truncated bodies', async () => {
    await sandbox.control.setFaults({
      partner: { error500: 0.2, error429: 0.1, retryAfterSeconds: 0, hang: 0.03, truncated: 0.05 },
    });
    const api = testApi(sandbox, {
      requestTimeoutMs: 500,
      retry: { maxRetries: 12, budgetMs: 60_000, baseDelayMs: 5, maxDelayMs: 50 },
    });
    try {
      const run = await runJob(
        { db: db, log: quietLog },
        { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(db, api), c, s) },
        {
          wait: true,
        },
      );
      expect(run.counts.fetched).toBe(5_000);
      await sandbox.control.submitReviews(sandbox.companyId, [{ comment: 'after the backfill' }]);
      await runJob(
        { db: db, log: quietLog },
        { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(db, api), c, s) },
        {
          wait: true,
        },
      );
      await runJob(
        { db: db, log: quietLog },
        { name: JOB.reconcile, run: (c, s) => reconcileReviews(pullContext(db, api), c, s) },
        {
          wait: true,
        },
      );
      const seen = (await sandbox.control.requests()).by_route['GET /api/v1/partner/reviews']!;
      for (const status of ['500', '429', 'hang', '200']) expect(seen[status]).toBeGreaterThan(0);
    } finally {
      await api.close();
      await sandbox.control.setFaults({});
    }
    expect(await expectExactMirror(db, sandbox)).toBe(5_001);
  });

  it('ends the run at once on 401 with the clear message, recording it', async () => {
    const api = testApi({ url: sandbox.url, apiKey: 'rm_revoked_key_000000' });
    try {
      const before = (await sandbox.control.requests()).total;
      const run = runJob(
        { db: db, log: quietLog },
        { name: JOB.reviews, run: (c, s) => syncReviews(pullContext(db, api), c, s) },
        {
          wait: true,
        },
      );
      await expect(run).rejects.toThrow(ApiAuthError);
      expect((await sandbox.control.requests()).total - before).toBe(1);
      const last = await db
        .knex(db.table('sync_runs'))
        .where({ job: JOB.reviews })
        .orderBy('id', 'desc')
        .first();
      expect(last.outcome).toBe('failed');
      expect(last.error).toBe('the API key is missing, invalid or inactive (GET /reviews answered 401)');
    } finally {
      await api.close();
    }
  });
});
