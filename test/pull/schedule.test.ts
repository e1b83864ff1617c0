import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/schema.js';
import type { Db } from '../../src/db/connect.js';
import { Scheduler } from '../../src/jobs/scheduler.js';
import { makeMetrics } from '../../src/metrics.js';
import { makePartnerApi, type PartnerApi, partnerApiOptions } from '../../src/partner-api/client.js';
import { pullJobSpecs } from '../../src/pull/jobs.js';
import { formatStatus, readStatus } from '../../src/status/report.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { expectExactMirror } from '../helpers/oracle.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

describe('scheduled pull jobs', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  const metrics = makeMetrics();
  let scheduler: Scheduler;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 1_000, seed: 21 });
    db = await freshDb();
    const config = parseConfig({
      REVIEWS_API_URL: sandbox.url,
      REVIEWS_API_KEY: sandbox.apiKey,
      // Only the start-up run: a minute tick during the test would add requests to the counts below.
      SYNC_REVIEWS_CRON: '0 0 1 1 *',
      SYNC_DIRECTORY_CRON: 'off',
      SYNC_RECONCILE_CRON: 'off',
    });
    api = makePartnerApi(partnerApiOptions(config, quietLog, metrics));
    scheduler = new Scheduler({ db, log: quietLog, metrics });
    const ctx = { db, api, log: quietLog, metrics, overlapMs: config.sync.overlapMs, detailConcurrency: 4 };
    for (const spec of pullJobSpecs(ctx, config.sync)) scheduler.add(spec);
    scheduler.start();
  });
  afterAll(async () => {
    await scheduler?.stop(1_000);
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  it('syncs reviews at start-up, records the run, and exports freshness metrics', async () => {
    await waitFor(
      async () =>
        (await db.knex(db.table('sync_runs')).where({ job: 'reviews' }).first())?.outcome === 'success',
      10_000,
    ).catch(() => {}); // the assertions below say what is wrong
    const run = await db.knex(db.table('sync_runs')).where({ job: 'reviews' }).first();
    expect(run).toMatchObject({ outcome: 'success', counts: { pages: 10, fetched: 1_000, inserted: 1_000 } });
    await expectExactMirror(db, sandbox);
    const text = await metrics.registry.metrics();
    expect(text).toContain('review_mirror_api_requests_total{route="GET /reviews",status="200"} 10');
    expect(text).toContain('review_mirror_reviews_upserted_total{source="feed",outcome="inserted"} 1000');
    expect(text).toMatch(/review_mirror_newest_review_timestamp_seconds 17\d{8}/);
    expect(text).toMatch(/review_mirror_last_complete_walk_timestamp_seconds\{sync_job="reviews"\} \d+/);
  });

  it('shows the job and the mirror in status', async () => {
    const report = await readStatus(db);
    const job = report.jobs.find((j) => j.job === 'reviews')!;
    expect(job).toMatchObject({ last_outcome: 'success', walk_in_progress: false, last_error: null });
    expect(job.watermark).toBe((await sandbox.control.visibleReviews(sandbox.companyId))[0]!.created_at);
    expect(report.mirror).toEqual({
      reviews: { total: 1_000, removed: 0, by_source: { feed: 1_000, webhook: 0 } },
      locations: { total: 0, removed: 0 },
      professionals: { total: 0, removed: 0 },
    });
    expect(formatStatus(report)).toContain(
      '  reviews        1000 (removed 0; first seen by feed 1000, by webhook 0)',
    );
  });
});
