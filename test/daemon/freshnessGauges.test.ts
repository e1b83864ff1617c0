import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { parseMetricsText } from '../../bench/metricsText.js';
import { type Db, openDb } from '../../src/db/connect.js';
import { CliProcess, freePort, runCli, waitForHttp } from '../helpers/cli.js';
import { type DaemonSetup, daemonSetup } from '../helpers/daemon.js';
import { dropSchema, POSTGRES_URL } from '../helpers/db.js';
import { scrapeMetrics } from '../helpers/metrics.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { startTcpProxy } from '../helpers/tcpProxy.js';
import { waitFor } from '../helpers/wait.js';

/** A `run` replica on the local PostgreSQL that schedules nothing (jobs that run at start still do). */
const NO_SCHEDULE = {
  DATABASE_URL: POSTGRES_URL,
  SYNC_REVIEWS_CRON: 'off',
  SYNC_DIRECTORY_CRON: 'off',
  SYNC_RECONCILE_CRON: 'off',
  WEBHOOK_HEALTH_CRON: 'off',
  SHUTDOWN_GRACE_SECONDS: '2',
};

/** Reads the replicas' database directly, as the test's oracle. */
async function inMirror<T>(schema: string, read: (db: Db) => Promise<T>): Promise<T> {
  const db = await openDb({ url: POSTGRES_URL, schema, poolMax: 1, dataDir: undefined });
  try {
    return await read(db);
  } finally {
    await db.close();
  }
}

async function cleanUp(sandbox: TestSandbox | undefined, setup: DaemonSetup | undefined): Promise<void> {
  await sandbox?.close();
  if (setup === undefined) return;
  await dropSchema(setup.schema, POSTGRES_URL);
  await rm(setup.dataDir, { recursive: true, force: true });
}

const NEWEST = 'review_mirror_newest_review_timestamp_seconds';
const walk = (job: string) => `review_mirror_last_complete_walk_timestamp_seconds{sync_job="${job}"}`;
const success = (job: string) => `review_mirror_job_last_success_timestamp_seconds{sync_job="${job}"}`;

/**
 * A replica that runs no job (another one holds the leases, or it has just restarted) still
 * reports how fresh the mirror is, from the mirror: not 0 (an age of 56 years on a dashboard) and
 * not nothing. Here the walks are done by one-shot `sync` processes, as another replica's jobs
 * would be, and the `run` replica has every schedule off.
 */
describe('freshness gauges of a replica that has run no job', () => {
  let sandbox: TestSandbox | undefined;
  let setup: DaemonSetup | undefined;
  afterAll(() => cleanUp(sandbox, setup));

  it('reports the mirror’s values from start-up, follows walks done elsewhere, and scrapes at once with the database hung', {
    timeout: 120_000,
  }, async () => {
    sandbox = await testSandbox({ seedReviews: 30, seed: 23 });
    const proxy = await startTcpProxy();
    setup = await daemonSetup(sandbox, NO_SCHEDULE);
    const { env, adminPort } = setup;
    const mirror = () =>
      inMirror(setup!.schema, async (db) => {
        const state = await db.knex(db.table('sync_state')).where({ job: 'reviews' }).first();
        const runs: Array<{ job: string; at: Date }> = await db
          .knex(db.table('sync_runs'))
          .where({ outcome: 'success' })
          .groupBy('job')
          .select('job', db.knex.raw('max(finished_at) as at'));
        return {
          watermark: (state.watermark as Date).getTime() / 1000,
          finished: new Map(runs.map((r) => [r.job, new Date(r.at).getTime() / 1000])),
        };
      });
    const scrape = async () => {
      const res = await fetch(`http://127.0.0.1:${adminPort}/metrics`, {
        signal: AbortSignal.timeout(1_000),
      });
      expect(res.status).toBe(200);
      return parseMetricsText(await res.text());
    };

    for (const target of ['reviews', 'locations', 'professionals']) {
      const result = await runCli(['sync', target], env);
      expect(result.code, result.stderr).toBe(0);
    }
    const before = await mirror();

    // Through a proxy, so that its database can hang later.
    const daemon = new CliProcess(['run'], {
      ...env,
      DATABASE_URL: proxy.url(new URL(POSTGRES_URL).pathname.slice(1)),
    });
    try {
      expect((await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`, 60_000)).status).toBe(200);
      const started = await scrape();
      // It ran nothing itself.
      expect(started.get('review_mirror_job_runs_total{sync_job="reviews",outcome="success"}')).toBe(0);
      expect(started.get(NEWEST)).toBeCloseTo(before.watermark, 2);
      for (const job of ['reviews', 'locations', 'professionals']) {
        expect(started.get(walk(job)), job).toBeCloseTo(before.finished.get(job)!, 2);
        expect(started.get(success(job)), job).toBeCloseTo(before.finished.get(job)!, 2);
      }
      expect(started.has(walk('reviews:reconcile'))).toBe(false); // never walked: no value, not 0

      // Another process walks the feed, now with a newer review: this replica follows.
      await sandbox.control.submitReviews(sandbox.companyId, [{ comment: 'newer than the rest' }]);
      expect((await runCli(['sync', 'reviews'], env)).code).toBe(0);
      const after = await mirror();
      expect(after.watermark).toBeGreaterThan(before.watermark);
      const followed = await waitFor(async () => {
        const samples = await scrape();
        return samples.get(walk('reviews')) === before.finished.get('reviews') ? undefined : samples;
      }, 30_000);
      expect(followed.get(walk('reviews'))).toBeCloseTo(after.finished.get('reviews')!, 2);
      expect(followed.get(NEWEST)).toBeCloseTo(after.watermark, 2);

      // The database hangs: a scrape still answers at once, with the last values.
      proxy.freeze();
      await new Promise((resolve) => setTimeout(resolve, 12_000)); // past a refresh that now hangs
      const scrapedAt = Date.now();
      const hung = await scrape();
      expect(Date.now() - scrapedAt).toBeLessThan(500);
      expect(hung.get(NEWEST)).toBeCloseTo(after.watermark, 2);
      expect(hung.get(walk('reviews'))).toBeCloseTo(after.finished.get('reviews')!, 2);
      proxy.heal();
      daemon.kill('SIGTERM');
      const result = await daemon.exited;
      expect(result.code, result.stdout).toBe(0);
    } finally {
      daemon.kill('SIGKILL');
      await proxy.close();
    }
  });
});

const webhooks = (state: string) => `review_mirror_webhooks{state="${state}"}`;
const MISS_RATIO = 'review_mirror_webhook_miss_ratio';

/**
 * The webhook gauges are levels of the last health check, which only one replica runs: a replica
 * that saw a failing webhook and no longer wins the job must not report it for good (the alerts
 * take `max` over replicas). Replica A's check sees a failing webhook; then the platform
 * recovers, and replica B's check, the newer one, sees it: A follows B.
 */
describe('webhook gauges of a replica that no longer runs the health check', () => {
  let sandbox: TestSandbox | undefined;
  let setup: DaemonSetup | undefined;
  afterAll(() => cleanUp(sandbox, setup));

  it('reports what the last health check recorded, wherever it ran', { timeout: 180_000 }, async () => {
    // Time scaled down: a delivery's retries after 1, 5 and 30 minutes take about two seconds.
    sandbox = await testSandbox({ timeScale: 0.001, allowHttpWebhooks: true });
    const { control, companyId } = sandbox;
    // Each replica checks once, at start-up only.
    setup = await daemonSetup(sandbox, NO_SCHEDULE);
    const { env, adminPort } = setup;
    const healthRuns = () =>
      inMirror(setup!.schema, async (db) => {
        const runs: Array<{ counts: Record<string, number> }> = await db
          .knex(db.table('sync_runs'))
          .where({ job: 'webhook-health', outcome: 'success' })
          .orderBy('started_at');
        return runs.map((r) => r.counts);
      });
    const register = async (url: string) => {
      const result = await runCli(['webhooks', 'register', '--url', url], env);
      expect(result.code, result.stderr).toBe(0);
      return /registered webhook (\S+) for/.exec(result.stdout)![1]!;
    };
    const deliveryStates = async (reviewId: string) =>
      (await control.truth(companyId)).deliveries.filter((d) => d.review_id === reviewId).map((d) => d.state);

    // A webhook whose every delivery gets a 404: the platform drops the review's delivery and
    // lists the webhook with last_error; the review reaches us by the feed (miss ratio 1).
    const broken = await register(`${sandbox.url}/nowhere`);
    const [missed] = await control.submitReviews(companyId, [{ comment: 'dropped' }]);
    await waitFor(async () => (await deliveryStates(missed!.id)).join() === 'dropped', 30_000);
    expect((await runCli(['sync', 'reviews'], env)).code).toBe(0);

    const a = new CliProcess(['run'], env);
    // B: the same database, ports of its own.
    const bEnv = { ...env, HTTP_PORT: String(await freePort()), ADMIN_PORT: String(await freePort()) };
    let replicaB: CliProcess | undefined;
    try {
      expect((await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`, 60_000)).status).toBe(200);
      const sawFailing = await waitFor(async () => {
        const sample = await scrapeMetrics(adminPort);
        return sample(webhooks('failing')) === 1 ? sample : undefined;
      }, 30_000);
      expect(sawFailing(webhooks('active'))).toBe(0);
      expect(sawFailing(MISS_RATIO)).toBe(1);

      // The platform recovers: the broken webhook goes, one to A's receiver takes its place and
      // delivers a review (the ratio falls to 1/2).
      const deleted = await runCli(['webhooks', 'delete', broken], env);
      expect(deleted.code, deleted.stderr).toBe(0);
      await register(setup.webhookUrl);
      const [delivered] = await control.submitReviews(companyId, [{ comment: 'delivered' }]);
      await waitFor(async () => (await deliveryStates(delivered!.id)).join() === 'delivered', 30_000);

      // Replica B checks, at its start-up: a newer run than A's, recorded by another process.
      replicaB = new CliProcess(['run'], bEnv);
      const runs = await waitFor(async () => {
        const counts = await healthRuns();
        return counts.length === 2 ? counts : undefined;
      }, 60_000);
      replicaB.kill('SIGTERM');
      const stopped = await replicaB.exited;
      expect(stopped.code, stopped.stderr).toBe(0);

      // A ran no check since its own, yet reports B's, within a refresh (10 s).
      const followed = await waitFor(async () => {
        const sample = await scrapeMetrics(adminPort);
        return sample(webhooks('failing')) === 0 ? sample : undefined;
      }, 30_000).catch(async (error: unknown) => {
        const sample = await scrapeMetrics(adminPort);
        const seen = `failing=${sample(webhooks('failing'))}, miss ratio=${sample(MISS_RATIO)}`;
        throw new Error(`A still reports ${seen}`, { cause: error });
      });
      expect(followed(webhooks('active'))).toBe(1);
      expect(followed(webhooks('inactive'))).toBe(0);
      expect(followed(MISS_RATIO)).toBe(0.5);
      expect(followed('review_mirror_job_runs_total{sync_job="webhook-health",outcome="success"}')).toBe(1);
      // What the two checks recorded, which the gauges were read from.
      expect(runs[0]).toMatchObject({
        active: 0,
        failing: 1,
        first_seen_by_feed: 1,
        first_seen_by_webhook: 0,
      });
      expect(runs[1]).toMatchObject({
        listed: 1,
        active: 1,
        inactive: 0,
        failing: 0,
        first_seen_by_feed: 1,
        first_seen_by_webhook: 1,
      });

      a.kill('SIGTERM');
      const result = await a.exited;
      expect(result.code, result.stderr).toBe(0);
    } finally {
      a.kill('SIGKILL');
      replicaB?.kill('SIGKILL');
    }
  });
});
