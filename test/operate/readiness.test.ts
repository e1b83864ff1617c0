import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { makeAdminServer } from '../../src/admin/server.js';
import { type Db, openDb } from '../../src/db/connect.js';
import { makeMetrics } from '../../src/metrics.js';
import type { StatusReport } from '../../src/status/report.js';
import { CliProcess, runCli, waitForHttp } from '../helpers/cli.js';
import { type DaemonSetup, daemonSetup } from '../helpers/daemon.js';
import { dropSchema, freshDb, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { testSandbox } from '../helpers/sandbox.js';
import { startTcpProxy } from '../helpers/tcpProxy.js';
import { waitFor } from '../helpers/wait.js';
import { makeReview, signedDelivery } from '../webhooks/helpers.js';

const SECRET = 'whsec_readiness_test';

/**
 * The choice docs/operations.md documents: `/readyz` says whether this replica can take webhooks,
 * and nothing of the platform. A `run` daemon whose API key is refused, then whose platform is
 * gone altogether, stays ready and keeps landing deliveries, while `status --json` and the
 * metrics say what the platform did at the last attempt. On the local PostgreSQL server, so that
 * `status` can read the database while the daemon holds it.
 */
describe('readiness when the platform refuses the key or cannot be reached', () => {
  let setup: DaemonSetup | undefined;
  afterAll(async () => {
    if (setup === undefined) return;
    await dropSchema(setup.schema, POSTGRES_URL);
    await rm(setup.dataDir, { recursive: true, force: true });
  });

  it('/readyz and /healthz stay 200 and webhooks land; status --json and /metrics carry the platform state', {
    timeout: 120_000,
  }, async () => {
    const sandbox = await testSandbox({ seedReviews: 20, seed: 31 });
    let sandboxOpen = true;
    setup = await daemonSetup(sandbox, {
      DATABASE_URL: POSTGRES_URL,
      SYNC_REVIEWS_CRON: '* * * * * *',
      SYNC_DIRECTORY_CRON: 'off',
      SYNC_RECONCILE_CRON: 'off',
      WEBHOOK_SECRETS: SECRET,
      API_MAX_RETRIES: '0',
      SHUTDOWN_GRACE_SECONDS: '2',
    });
    const { env, adminPort, webhookUrl } = setup;
    const admin = (path: string) => fetch(`http://127.0.0.1:${adminPort}${path}`);
    const status = async (): Promise<StatusReport> => {
      const result = await runCli(['status', '--json'], env);
      expect(result.stderr).toBe('');
      return JSON.parse(result.stdout) as StatusReport;
    };
    const reviewsJob = (report: StatusReport) => report.jobs.find((j) => j.job === 'reviews');
    const deliver = async () => {
      const review = makeReview();
      const d = signedDelivery(SECRET, review);
      const res = await fetch(webhookUrl, { method: 'POST', headers: d.headers, body: d.body });
      return { status: res.status, id: review.id };
    };
    /** What a load balancer and an orchestrator see, whatever the platform does. */
    const expectServing = async () => {
      expect((await admin('/readyz')).status).toBe(200);
      expect((await admin('/healthz')).status).toBe(200);
      expect((await deliver()).status).toBe(200);
    };

    const daemon = new CliProcess(['run'], env);
    try {
      expect((await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`, 60_000)).status).toBe(200);
      const synced = await waitFor(async () => {
        const report = await status();
        return reviewsJob(report)?.last_outcome === 'success' ? report : undefined;
      }, 60_000);
      expect(synced.platform).toMatchObject({ api_key_accepted: true });
      await expectServing();

      // The key is refused: a fatal failure of every sync, and still ready.
      await sandbox.control.deactivateKey(sandbox.apiKey);
      // The platform state is recorded at the answer, the job's outcome when its run ends, and a
      // new run starts every second: wait for a status that shows both, not the first of them.
      const refused = await waitFor(async () => {
        const report = await status();
        const job = reviewsJob(report);
        const failedOnKey =
          job?.last_outcome === 'failed' && job.last_error?.includes('API key is missing') === true;
        return report.platform?.api_key_accepted === false && failedOnKey ? report : undefined;
      }, 60_000);
      expect(reviewsJob(refused)?.last_error).toContain('the API key is missing, invalid or inactive');
      await expectServing();
      expect(await (await admin('/metrics')).text()).toMatch(
        /^review_mirror_api_requests_total\{route="GET \/reviews",status="40[13]"\} [1-9]/m,
      );

      // The platform is gone: nothing is known of the key, the syncs fail, and still ready.
      await sandbox.close();
      sandboxOpen = false;
      const unreachable = await waitFor(async () => {
        const report = await status();
        const job = reviewsJob(report);
        // Another job may learn first that the platform is gone: wait for a reviews run since
        // then, not the one the refused key failed.
        const runSinceGone =
          job?.last_outcome === 'failed' && !job.last_error?.includes('API key is missing');
        return report.platform?.api_key_accepted === null && runSinceGone ? report : undefined;
      }, 60_000);
      expect(unreachable.platform?.checked_at).toEqual(expect.any(String));
      expect(reviewsJob(unreachable)?.last_error).toMatch(/ECONNREFUSED/);
      await expectServing();
      expect(await (await admin('/metrics')).text()).toMatch(
        /^review_mirror_api_requests_total\{route="GET \/reviews",status="network"\} [1-9]/m,
      );
      // The three deliveries, taken while the platform answered, refused the key and was gone.
      expect((await status()).mirror?.reviews).toMatchObject({
        total: 23,
        by_source: { feed: 20, webhook: 3 },
      });

      daemon.kill('SIGTERM');
      const exit = await daemon.exited; // the test's own timeout bounds this wait
      expect(exit.code).toBe(0);
    } finally {
      daemon.kill('SIGKILL');
      if (sandboxOpen) await sandbox.close();
    }
  });
});

/** `/readyz` of a running daemon's admin server on `db`, as a load balancer asks it. */
async function readyz(db: Db): Promise<{ status: number; body: unknown }> {
  const admin = makeAdminServer({ metrics: makeMetrics() });
  admin.running(db, []);
  try {
    const res = await admin.app.inject({ method: 'GET', url: '/readyz' });
    return { status: res.statusCode, body: res.json() };
  } finally {
    await admin.close();
  }
}

/**
 * What `/readyz` says of the database: whether it answers this replica, not whether a connection of
 * the pool is free within the probe's bound. A replica whose connections are all busy (a reconcile,
 * a backfill's COPY, the embedded database's one connection) still commits deliveries, late; taken
 * out of the load balancer, it took none.
 */
describe("readiness and the replica's database", () => {
  it('stays ready while every connection is busy with work the database answers, and the commit behind it lands', async () => {
    const db = await freshDb();
    try {
      const scratch = db.table('readiness_commits');
      await db.knex.raw('create table ?? (id serial primary key)', [scratch]);
      // freshDb's pool: 5 connections on a server, the embedded database's one.
      const connections = db.backend === 'postgres' ? 5 : 1;
      let started = 0;
      const busy = Array.from({ length: connections }, () =>
        db.knex.transaction(async (trx) => {
          started++;
          // Longer than the probe's 2 s bound, shorter than a delivery's 5 s commit timeout.
          const until = Date.now() + 3_500;
          while (Date.now() < until) {
            await trx.raw('select 1');
            await sleep(50);
          }
        }),
      );
      while (started < connections) await sleep(10);
      const delivery = db.knex.transaction(async (trx) => trx(scratch).insert({}));
      const ready = await readyz(db);
      await Promise.all(busy);
      await delivery;
      expect(await db.knex(scratch).count({ n: '*' })).toEqual([{ n: db.backend === 'postgres' ? '1' : 1 }]);
      expect(ready).toEqual({ status: 200, body: { status: 'ready' } });
    } finally {
      await db.close();
    }
  });

  it('is not ready while the database does not answer (a frozen connection)', async () => {
    const proxy = await startTcpProxy();
    const db = await openDb({
      url: proxy.url(new URL(POSTGRES_URL).pathname.slice(1)),
      schema: uniqueSchema(),
      poolMax: 2,
      dataDir: undefined,
    });
    try {
      expect(await readyz(db)).toEqual({ status: 200, body: { status: 'ready' } });
      proxy.freeze();
      expect(await readyz(db)).toEqual({
        status: 503,
        body: { status: 'not ready', problems: ['database unreachable'] },
      });
    } finally {
      proxy.up();
      await proxy.close();
      await db.close().catch(() => {});
    }
  });
});
