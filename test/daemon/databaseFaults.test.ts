import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/db/connect.js';
import { CliProcess, waitForHttp } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema, TEST_DATABASE_URL } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { waitFor } from '../helpers/wait.js';
import { makeReview, signedDelivery } from '../webhooks/helpers.js';

/**
 * What a database server does to its clients — restarts, failovers, frozen networks — needs a
 * server: every machine of this project has one on 127.0.0.1:5432, which the suite uses here
 * even when the rest runs on the embedded database.
 */
const SERVER_URL = TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SECRET = 'whsec_database_faults_test';

const logLines = (out: string) =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; job?: string });

describe('the daemon when its database connections die or freeze', () => {
  let sandbox: TestSandbox;
  let proxy: TcpProxy;
  const schemas: string[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 3_000, seed: 12 });
    proxy = await startTcpProxy();
  });
  afterAll(async () => {
    await proxy?.close();
    await sandbox?.close();
    for (const schema of schemas) await dropSchema(schema, SERVER_URL);
  });

  async function start(vars: Record<string, string>) {
    const setup = await daemonSetup(sandbox, {
      DATABASE_URL: proxy.url(new URL(SERVER_URL).pathname.slice(1)),
      LOG_LEVEL: 'info',
      ...vars,
    });
    schemas.push(setup.schema);
    const daemon = new CliProcess(['run'], setup.env);
    await waitForHttp(`http://127.0.0.1:${setup.adminPort}/healthz`, 30_000);
    return { setup, daemon };
  }

  it('survives its connections being dropped mid-sync, retries the job and keeps serving', async () => {
    // Slow pages, so that a walk (and its lock session) is under way when the connections drop.
    await sandbox.control.setFaults({
      partner: { delay: 1, delayMs: 150, routes: ['/api/v1/partner/reviews'] },
    });
    // A lease whose release a drop cut off is taken back once it expires: 10 s, not the default
    // 30, or a busy machine's recovery (expiry, then a walk of slow pages) outlasts the test.
    const { setup, daemon } = await start({ SYNC_REVIEWS_CRON: '* * * * * *', JOB_LEASE_SECONDS: '10' });
    try {
      const db = await openDb({ url: SERVER_URL, schema: setup.schema, poolMax: 1, dataDir: undefined });
      try {
        await waitFor(
          async () => (await db.knex(db.table('sync_runs')).where({ outcome: 'running' })).length > 0,
        );
        for (let i = 0; i < 3; i++) {
          proxy.dropAll();
          await new Promise((r) => setTimeout(r, 400));
        }
        await sandbox.control.setFaults({});
        const droppedAt = new Date();
        await waitFor(
          async () =>
            (
              await db
                .knex(db.table('sync_runs'))
                .where({ job: 'reviews', outcome: 'success' })
                .where('started_at', '>', droppedAt)
            ).length > 0,
          60_000,
        );
        expect(daemon.child.exitCode).toBeNull();
        expect((await fetch(`http://127.0.0.1:${setup.adminPort}/readyz`)).status).toBe(200);
        const failed = await db.knex(db.table('sync_runs')).where({ outcome: 'failed' });
        expect(failed.every((r) => r.error_kind === 'retryable')).toBe(true);
        expect(Number((await db.knex(db.table('reviews')).count())[0]?.count)).toBe(3_000);
      } finally {
        await db.close();
      }
      daemon.kill('SIGTERM');
      const exit = await daemon.exited;
      expect(exit.code).toBe(0);
      expect(exit.stderr).not.toContain("Emitted 'error' event");
      // Nothing starts once shutdown began.
      const lines = logLines(exit.stdout);
      const shuttingDown = lines.findIndex((l) => l.msg === 'shutting down');
      expect(shuttingDown).toBeGreaterThan(0);
      expect(lines.slice(shuttingDown).some((l) => l.msg === 'sync job started')).toBe(false);
    } finally {
      daemon.kill('SIGKILL');
      await sandbox.control.setFaults({});
    }
  });

  it('answers 503 while its database is frozen, says not ready, recovers once healed, and always shuts down', async () => {
    const { setup, daemon } = await start({
      REVIEWS_API_URL: '',
      WEBHOOK_SECRETS: SECRET,
      WEBHOOK_COMMIT_TIMEOUT_SECONDS: '1',
      SHUTDOWN_GRACE_SECONDS: '1',
    });
    const url = `http://127.0.0.1:${setup.httpPort}/webhooks/review-created`;
    const readyz = `http://127.0.0.1:${setup.adminPort}/readyz`;
    const deliver = async () => {
      const d = signedDelivery(SECRET, makeReview());
      const res = await fetch(url, {
        method: 'POST',
        headers: d.headers,
        body: d.body,
        signal: AbortSignal.timeout(20_000),
      });
      return { status: res.status, body: (await res.json()) as unknown };
    };
    try {
      expect((await deliver()).status).toBe(200);
      expect((await fetch(readyz)).status).toBe(200);

      proxy.freeze();
      // A bound, not a timing: without one the request would hang until the client gives up.
      expect(await deliver()).toEqual({ status: 503, body: { error: 'commit_timeout' } });
      const notReady = await fetch(readyz, { signal: AbortSignal.timeout(20_000) });
      expect(notReady.status).toBe(503);

      proxy.heal();
      await waitFor(async () => (await deliver()).status === 200, 30_000, 200);
      await waitFor(async () => (await fetch(readyz)).status === 200, 30_000, 200);

      // The server restarts: a commit refused, not ready. Sent no delivery while not ready, the
      // replica still finds its database back (its own probe commit) well before the minute the
      // failure would otherwise keep it not ready for.
      proxy.down();
      expect(await deliver()).toEqual({ status: 503, body: { error: 'commit_failed' } });
      expect((await fetch(readyz)).status).toBe(503);
      proxy.up();
      await waitFor(async () => (await fetch(readyz)).status === 200, 30_000, 200);
      expect((await deliver()).status).toBe(200);

      proxy.freeze();
      daemon.kill('SIGTERM');
      const exit = await daemon.exited; // the test's own timeout bounds this wait
      const abandoned = exit.stdout.includes('shutdown deadline passed');
      expect(exit.code).toBe(abandoned ? 1 : 0);
    } finally {
      proxy.heal();
      proxy.up();
      daemon.kill('SIGKILL');
    }
  });
});
