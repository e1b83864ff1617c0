import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { RetryableError } from '../../src/errors.js';
import { JobLease, LeaseLostError } from '../../src/jobs/lease.js';
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

/** A port nothing listens on: connecting to it is refused at once. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
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
    expect(text).toContain(`${runsLine('reviews', 'success')} 0`);
    body.open();
    await Promise.all([first, second]);
    const after = await metrics.registry.metrics();
    expect(runs).toBe(1);
    expect(after).toContain(`${runsLine('reviews', 'success')} 1`);
    expect(after).toContain(lastSuccessLine('reviews'));
    await scheduler.stop(1_000);
  });

  it('runs a job afresh after the run under way, for a caller that changed what the run reads', async () => {
    const scheduler = new Scheduler({ db, log: quietLog });
    const body = gate();
    const started: number[] = [];
    const ended: number[] = [];
    scheduler.add({
      name: 'webhook-health',
      schedule: 'off',
      run: async () => {
        started.push(performance.now());
        if (started.length === 1) await body.opened;
        ended.push(performance.now());
      },
    });
    const underWay = scheduler.trigger('webhook-health');
    const afresh = scheduler.triggerAfresh('webhook-health');
    body.open();
    await Promise.all([underWay, afresh]);
    expect(started).toHaveLength(2);
    expect(started[1]).toBeGreaterThanOrEqual(ended[0]!);
    // With nothing under way, it runs at once.
    await scheduler.triggerAfresh('webhook-health');
    expect(started).toHaveLength(3);
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
    expect(text).toContain(`${runsLine('locations', 'success')} 0`);
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

  it('counts a run that fails taking its lease, as during a database outage', async () => {
    const metrics = makeMetrics();
    // A server that refuses connections: the lease, the run's first statement, fails.
    const down = await openDb({
      url: `postgres://postgres@127.0.0.1:${await closedPort()}/test`,
      schema: 'nowhere',
      poolMax: 1,
      dataDir: undefined,
    });
    try {
      for (let i = 0; i < 2; i++) {
        await expect(
          runJob(
            { db: down, log: quietLog, metrics },
            { name: 'reviews', run: async () => {} },
            { wait: false },
          ),
        ).rejects.toThrow();
      }
    } finally {
      await down.close();
    }
    expect(await metrics.registry.metrics()).toContain(`${runsLine('reviews', 'retryable_failure')} 2`);
  });

  it('counts a run that fails starting its run record, and frees the lease', async () => {
    const broken = await freshDb();
    try {
      await broken.knex.raw('alter table ?? rename to ??', [broken.table('sync_runs'), 'sync_runs_gone']);
      const metrics = makeMetrics();
      await expect(
        runJob(
          { db: broken, log: quietLog, metrics },
          { name: 'locations', run: async () => {} },
          { wait: false },
        ),
      ).rejects.toThrow(/sync_runs/);
      expect(await metrics.registry.metrics()).toContain(`${runsLine('locations', 'retryable_failure')} 1`);
      const lease = await JobLease.tryAcquire(broken, 'locations', { holder: 'next', seconds: 30 }, quietLog);
      expect(lease).toBeDefined();
      await lease?.release();
    } finally {
      await broken.close();
    }
  });

  it('runs a tick that came late because the event loop was busy, and logs nothing on the console', async () => {
    const consoleWarn = vi.spyOn(console, 'warn');
    const scheduler = new Scheduler({ db, log: quietLog });
    const ranAt: number[] = [];
    scheduler.add({
      name: 'reviews:reconcile',
      schedule: '*/5 * * * * *',
      exclusive: false,
      run: async () => void ranAt.push(Date.now()),
    });
    try {
      scheduler.start();
      // One second before a tick, the event loop stays busy for three (a migration, a large parse).
      const tick = Math.ceil((Date.now() + 1_500) / 5_000) * 5_000;
      await sleep(tick - 1_000 - Date.now());
      while (Date.now() < tick + 2_000) {
        // busy
      }
      await sleep(1_000); // still well before the next tick
      expect(ranAt.filter((at) => at >= tick)).toHaveLength(1);
      expect(ranAt.at(-1)).toBeGreaterThanOrEqual(tick + 2_000);
      expect(consoleWarn.mock.calls.flat().join('\n')).not.toContain('NODE-CRON');
    } finally {
      consoleWarn.mockRestore();
      await scheduler.stop(1_000);
    }
  });

  it('leaves a run that ended after another replica took the job over marked interrupted, and counts it a failure', async () => {
    const metrics = makeMetrics();
    const body = gate();
    const started = gate();
    const run = runJob(
      { db, log: quietLog, metrics, lease: { holder: 'replica-a', seconds: 30 } },
      {
        name: 'locations',
        run: async () => {
          started.open();
          await body.opened;
        },
      },
      { wait: false },
    );
    await started.opened;
    // The lease runs out (the replica stalled) and another replica starts its own run of the job.
    await db
      .knex(db.table('job_leases'))
      .where({ job: 'locations' })
      .update({ expires_at: db.knex.raw("now() - interval '1 second'") });
    await runJob(
      { db, log: quietLog, lease: { holder: 'replica-b', seconds: 30 } },
      { name: 'locations', run: async () => {} },
      { wait: false },
    );
    body.open();
    // Not a success, whatever its body did: its record says interrupted. Counted as one, it set the
    // job's last success on this replica while sync_runs and the other replicas said otherwise.
    await expect(run).rejects.toThrow(LeaseLostError);
    const text = await metrics.registry.metrics();
    expect(text).toContain(`${runsLine('locations', 'success')} 0`);
    expect(text).toContain(`${runsLine('locations', 'retryable_failure')} 1`);
    expect(text).not.toContain(lastSuccessLine('locations'));
    const runs = await db
      .knex(db.table('sync_runs'))
      .where({ job: 'locations' })
      .orderBy('id')
      .select('replica', 'outcome');
    expect(runs.slice(-2)).toEqual([
      { replica: 'replica-a', outcome: 'interrupted' },
      { replica: 'replica-b', outcome: 'success' },
    ]);
  });

  it('records and counts a run stopped by shutdown as interrupted, not as a failure', async () => {
    const metrics = makeMetrics();
    const scheduler = new Scheduler({ db, log: quietLog, metrics });
    const started = gate();
    scheduler.add({
      name: 'reviews:reconcile',
      schedule: 'off',
      // As a walk does: it works until its signal aborts, then rejects with the abort.
      run: async (counts, signal) => {
        counts.pages = 3;
        started.open();
        await new Promise((_resolve, reject) => {
          signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
        });
      },
    });
    const run = scheduler.trigger('reviews:reconcile');
    await started.opened;
    // A deploy: no grace left, the run in flight is aborted.
    await scheduler.stop(0);
    await run;
    // Two deploys during the daily reconcile are no failure: counted as one, they paged.
    const text = await metrics.registry.metrics();
    expect(text).toContain(`${runsLine('reviews:reconcile', 'interrupted')} 1`);
    expect(text).toContain(`${runsLine('reviews:reconcile', 'retryable_failure')} 0`);
    expect(text).toContain(`${runsLine('reviews:reconcile', 'fatal_failure')} 0`);
    expect(text).not.toContain(lastSuccessLine('reviews:reconcile'));
    const [last] = await db
      .knex(db.table('sync_runs'))
      .where({ job: 'reviews:reconcile' })
      .orderBy('id', 'desc')
      .limit(1)
      .select('outcome', 'error', 'error_kind', 'counts', 'finished_at');
    expect(last).toMatchObject({ outcome: 'interrupted', error_kind: null });
    expect(last.error).toMatch(/abort/i);
    expect(last.finished_at).not.toBeNull();
    expect(typeof last.counts === 'string' ? JSON.parse(last.counts) : last.counts).toEqual({ pages: 3 });
    // Its lease is free for the next replica at once.
    const [lease] = await db
      .knex(db.table('job_leases'))
      .where({ job: 'reviews:reconcile' })
      .select(db.knex.raw('expires_at <= now() as free'));
    expect(lease.free).toBe(true);
  });

  it('counts a run that lost its lease as a failure even when shutdown came as it stopped', async () => {
    const metrics = makeMetrics();
    const shutdown = new AbortController();
    const started = gate();
    const run = runJob(
      // Renewed every second: the renewal finds the takeover soon.
      { db, log: quietLog, metrics, lease: { holder: 'replica-a', seconds: 3 } },
      {
        name: 'professionals',
        run: async (_counts, signal) => {
          started.open();
          await new Promise((_resolve, reject) => {
            signal?.addEventListener(
              'abort',
              () => {
                // A deploy stops the process while the run stops for its lost lease.
                shutdown.abort();
                reject(signal.reason);
              },
              { once: true },
            );
          });
        },
      },
      { wait: false, signal: shutdown.signal },
    );
    await started.opened;
    // Another replica takes the job over.
    await db
      .knex(db.table('job_leases'))
      .where({ job: 'professionals' })
      .update({ token: db.knex.raw('token + 1'), holder: 'replica-b' });
    await expect(run).rejects.toThrow(LeaseLostError);
    expect(shutdown.signal.aborted).toBe(true);
    const text = await metrics.registry.metrics();
    expect(text).toContain(`${runsLine('professionals', 'retryable_failure')} 1`);
    expect(text).not.toContain(`${runsLine('professionals', 'interrupted')} 1`);
  });

  it('counts a run whose end could not be recorded (the database went away) as a failure', async () => {
    const broken = await freshDb();
    try {
      const metrics = makeMetrics();
      await expect(
        runJob(
          { db: broken, log: quietLog, metrics },
          {
            name: 'locations',
            // After the body's work, the run's end cannot be written: counted as nothing, the
            // alerts on failing runs never saw it.
            run: async () => {
              await broken.knex.raw('alter table ?? rename to ??', [
                broken.table('sync_runs'),
                'sync_runs_gone',
              ]);
            },
          },
          { wait: false },
        ),
      ).rejects.toThrow(/sync_runs/);
      const text = await metrics.registry.metrics();
      expect(text).toContain(`${runsLine('locations', 'success')} 0`);
      expect(text).toContain(`${runsLine('locations', 'retryable_failure')} 1`);
    } finally {
      await broken.close();
    }
  });

  it("prunes a job's runs past their retention after each run, but never its last successful one", async () => {
    const runs = () => db.knex(db.table('sync_runs'));
    const ago = (days: number) => db.knex.raw('now() - make_interval(days => ?)', [days]);
    const seed = async (job: string, outcome: string, days: number): Promise<string> => {
      const [row] = await runs()
        .insert({ job, outcome, started_at: ago(days), finished_at: ago(days) })
        .returning('id');
      return String(row.id);
    };
    // One at a time: the assertions list runs in id order.
    const oldest = await seed('contacts:inbox', 'success', 120);
    const lastSuccess = await seed('contacts:inbox', 'success', 100);
    const oldFailure = await seed('contacts:inbox', 'failed', 95);
    const recent = await seed('contacts:inbox', 'failed', 10);
    const otherJob = await seed('provision', 'success', 200);
    const left = async () =>
      (await runs().whereIn('job', ['contacts:inbox', 'provision']).orderBy('id').select('id')).map((r) =>
        String(r.id),
      );
    const deps = { db, log: quietLog, runRetentionDays: 90 };

    // A failed run prunes too; the job's last success stays, however old.
    const down = new RetryableError('platform down');
    await expect(
      runJob(deps, { name: 'contacts:inbox', run: async () => Promise.reject(down) }, { wait: false }),
    ).rejects.toBe(down);
    const [failedRun] = (await left()).slice(-1);
    expect(await left()).toEqual([lastSuccess, recent, otherJob, failedRun]);
    expect([oldest, oldFailure]).not.toContain(failedRun);

    // Once a newer run succeeded, the old success goes as well; another job's runs wait for its own.
    await runJob(deps, { name: 'contacts:inbox', run: async () => {} }, { wait: false });
    const [succeeded] = (await left()).slice(-1);
    expect(await left()).toEqual([recent, otherJob, failedRun, succeeded]);
  });

  it("counts a prune of the job's old runs that fails, and the run's success stands", async () => {
    const broken = await freshDb();
    try {
      const metrics = makeMetrics();
      // The database refuses the prune's delete (as a statement timeout or a lock would fail it).
      await broken.knex.raw(
        `create function ??() returns trigger language plpgsql as $$ begin raise exception 'no deletes here'; end $$`,
        [broken.table('refuse_delete')],
      );
      await broken.knex.raw('create trigger refuse_delete before delete on ?? execute function ??()', [
        broken.table('sync_runs'),
        broken.table('refuse_delete'),
      ]);
      const pruneFailures = 'review_mirror_prune_failures_total{table="sync_runs"}';
      expect(await metrics.registry.metrics()).toContain(`${pruneFailures} 0`);
      await runJob(
        { db: broken, log: quietLog, metrics },
        { name: 'locations', run: async () => {} },
        { wait: false },
      );
      const text = await metrics.registry.metrics();
      expect(text).toContain(`${pruneFailures} 1`);
      expect(text).toContain(`${runsLine('locations', 'success')} 1`);
      const [last] = await broken
        .knex(broken.table('sync_runs'))
        .orderBy('id', 'desc')
        .limit(1)
        .select('outcome');
      expect(last.outcome).toBe('success');
    } finally {
      await broken.close();
    }
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
