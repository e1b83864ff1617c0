import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { RetryableError } from '../../src/errors.js';
import { JobLease } from '../../src/jobs/lease.js';
import { runJob } from '../../src/jobs/runner.js';
import { Scheduler } from '../../src/jobs/scheduler.js';
import { SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import { ApiAuthError } from '../../src/partner-api/errors.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';

/** A promise and the function that settles it: a job body the test lets finish when it wants. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

const lastSuccessLine = (job: string) =>
  `review_mirror_job_last_success_timestamp_seconds{sync_job="${job}"}`;
const runsLine = (job: string, outcome: string) =>
  `review_mirror_job_runs_total{sync_job="${job}",outcome="${outcome}"}`;

describe('the job runner and scheduler', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => db?.close());

  it('counts a tick skipped because the job still runs here as skipped, not as a success', async () => {
    const metrics = makeMetrics();
    const scheduler = new Scheduler({ db, log: quietLog, metrics });
    const body = gate();
    let runs = 0;
    scheduler.add({
      name: 'reviews',
      schedule: 'off',
      run: async () => {
        runs++;
        await body.opened;
      },
    });
    const first = scheduler.trigger('reviews');
    const second = scheduler.trigger('reviews'); // the first run's promise: it does not start another
    const text = await metrics.registry.metrics();
    expect(text).toContain(`${runsLine('reviews', 'skipped')} 1`);
    expect(text).not.toContain(runsLine('reviews', 'success'));
    body.open();
    await Promise.all([first, second]);
    const after = await metrics.registry.metrics();
    expect(runs).toBe(1);
    expect(after).toContain(`${runsLine('reviews', 'success')} 1`);
    expect(after).toContain(lastSuccessLine('reviews'));
    await scheduler.stop(1_000);
  });

  it('counts a run skipped because another replica holds the job as skipped and leaves last success alone', async () => {
    const metrics = makeMetrics();
    const scheduler = new Scheduler({ db, log: quietLog, metrics });
    let ran = false;
    scheduler.add({
      name: 'locations',
      schedule: 'off',
      run: async () => {
        ran = true;
      },
    });
    // Another replica holds the job's lease (on either backend: a lease is a row).
    const other = await JobLease.tryAcquire(
      db,
      'locations',
      { holder: 'other-replica', seconds: 30 },
      quietLog,
    );
    expect(other).toBeDefined();
    await scheduler.trigger('locations');
    const text = await metrics.registry.metrics();
    await other?.release();
    await scheduler.stop(1_000);
    expect(ran).toBe(false);
    expect(text).toContain(`${runsLine('locations', 'skipped')} 1`);
    expect(text).not.toContain(runsLine('locations', 'success'));
    expect(text).not.toContain(lastSuccessLine('locations'));
    expect(await db.knex(db.table('sync_runs')).where({ job: 'locations' })).toEqual([]);
  });

  it('tells retryable from fatal failures, in the run record and the metrics, with the error scrubbed', async () => {
    const metrics = makeMetrics();
    const scrubber = new SecretScrubber(['sk_live_123456']);
    const deps = { db, log: quietLog, metrics, scrubber };
    const down = new RetryableError('platform down; echoed key sk_live_123456');
    await expect(
      runJob(deps, { name: 'reviews:reconcile', run: async () => Promise.reject(down) }, { wait: false }),
    ).rejects.toBe(down);
    const badKey = new ApiAuthError({ route: 'GET /reviews', status: 401 });
    await expect(
      runJob(deps, { name: 'professionals', run: async () => Promise.reject(badKey) }, { wait: false }),
    ).rejects.toBe(badKey);

    const rows = await db
      .knex(db.table('sync_runs'))
      .whereIn('job', ['reviews:reconcile', 'professionals'])
      .orderBy('id');
    expect(rows.map((r) => [r.job, r.outcome, r.error_kind])).toEqual([
      ['reviews:reconcile', 'failed', 'retryable'],
      ['professionals', 'failed', 'fatal'],
    ]);
    expect(rows[0].error).toBe('platform down; echoed key [REDACTED]');
    const text = await metrics.registry.metrics();
    expect(text).toContain(`${runsLine('reviews:reconcile', 'retryable_failure')} 1`);
    expect(text).toContain(`${runsLine('professionals', 'fatal_failure')} 1`);
    expect(text).not.toContain(lastSuccessLine('professionals'));
  });

  it('starts nothing once stopping began', async () => {
    const scheduler = new Scheduler({ db, log: quietLog });
    let runs = 0;
    scheduler.add({ name: 'webhook-health', schedule: 'off', run: async () => void runs++ });
    await scheduler.stop(1_000);
    await scheduler.trigger('webhook-health');
    expect(runs).toBe(0);
  });
});
