import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/db/connect.js';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { signDelivery } from '../../src/webhooks/signature.js';
import { CliProcess, runCli, waitForHttp } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema, TEST_DATABASE_URL } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

/** The whole daemon as a real process against the sandbox: what an operator sees. */
describe('`run` against the sandbox', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  const schemas: string[] = [];

  beforeAll(async () => {
    sandbox = await testSandbox({
      seedReviews: 30_000,
      seed: 3,
      timeScale: 0.01,
      allowHttpWebhooks: true,
    });
    ({ control } = sandbox);
  });
  afterAll(async () => {
    await sandbox?.close();
    for (const schema of schemas) await dropSchema(schema);
  });

  async function daemonEnv(vars: Record<string, string>) {
    const setup = await daemonSetup(sandbox, vars);
    schemas.push(setup.schema);
    return setup;
  }

  it('never lets the API key or a signing secret reach its logs, errors or metrics', async () => {
    const { env, httpPort, adminPort, webhookUrl } = await daemonEnv({ LOG_LEVEL: 'trace' });
    env.WEBHOOK_PUBLIC_URL = webhookUrl;
    // Failures make the client log retries and errors: the places a careless key would leak.
    // (On the feed only: registration is a POST, which is not retried after a 500.)
    await control.setFaults({
      partner: { error500: 0.3, error429: 0.1, retryAfterSeconds: 0, routes: ['/api/v1/partner/reviews'] },
    });
    const daemon = new CliProcess(['run'], env);
    try {
      await waitForHttp(`http://127.0.0.1:${adminPort}/healthz`, 30_000);
      await waitFor(async () => (await control.truth(sandbox.companyId)).webhooks.length === 1, 30_000);
      const secret = (await control.truth(sandbox.companyId)).webhooks[0]!.signing_secret;
      expect(secret).toMatch(/^whsec_/);
      const [review] = await control.submitReviews(sandbox.companyId, [{ comment: 'secret test' }]);
      await waitFor(
        async () =>
          (await control.truth(sandbox.companyId)).deliveries.some(
            (d) => d.review_id === review!.id && d.state === 'delivered',
          ),
        30_000,
      );
      // A forged delivery is refused and logged.
      const body = JSON.stringify({ event: 'review.created', timestamp: '1', data: review });
      const forged = await fetch(`http://127.0.0.1:${httpPort}/webhooks/review-created`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-ee-timestamp': '1',
          'x-ee-signature': signDelivery(`${secret}x`, '1', body),
        },
        body,
      });
      expect(forged.status).toBe(401);
      const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
      expect(metrics).toContain('review_mirror_api_retries_total');
      expect(metrics).toContain('review_mirror_webhook_refusals_total{reason="bad_signature"} 1');
      daemon.kill('SIGTERM');
      const exit = await daemon.exited;
      expect(exit.code).toBe(0);
      const output = exit.stdout + exit.stderr + metrics;
      expect(exit.stdout).toContain('partner API request failed; retrying');
      expect(exit.stdout).toContain('webhook delivery refused');
      expect(output).not.toContain(sandbox.apiKey);
      expect(output).not.toContain(secret);
    } finally {
      daemon.kill('SIGKILL');
      await control.setFaults({});
    }
  });

  it('on SIGTERM during a sync, stops within the grace period, exits 0 and resumes where it stopped', async () => {
    const { env, adminPort, schema } = await daemonEnv({ LOG_LEVEL: 'warn', SHUTDOWN_GRACE_SECONDS: '1' });
    // Slow pages keep the initial 30,000-review backfill running when the signal comes.
    await control.setFaults({ partner: { delay: 1, delayMs: 20 } });
    try {
      const daemon = new CliProcess(['run'], env);
      await waitForHttp(`http://127.0.0.1:${adminPort}/healthz`, 30_000);
      await new Promise((r) => setTimeout(r, 1_500));
      daemon.kill('SIGTERM');
      const exit = await Promise.race([
        daemon.exited,
        new Promise<'hung'>((r) => setTimeout(() => r('hung'), 10_000).unref()),
      ]);
      if (exit === 'hung') daemon.kill('SIGKILL');
      expect(exit).toMatchObject({ code: 0, signal: null });

      let stored: number;
      const db = await openDb({ url: TEST_DATABASE_URL, schema, poolMax: 1, dataDir: env.DATA_DIR });
      try {
        const state = await db.knex(db.table('sync_state')).where({ job: 'reviews' }).first();
        // Stopped mid-walk: the checkpoint holds where to resume, the watermark has not moved.
        expect(state.cursor).not.toBeNull();
        expect(state.watermark).toBeNull();
        stored = Number((await db.knex(db.table('reviews')).count({ n: '*' }))[0]!.n);
        expect(stored).toBeGreaterThan(0);
        expect(stored).toBeLessThan(30_000);
        const run = await db
          .knex(db.table('sync_runs'))
          .where({ job: 'reviews' })
          .orderBy('id', 'desc')
          .first();
        // Stopped by the shutdown, which is no failure of the job.
        expect(run.outcome).toBe('interrupted');
        expect(run.finished_at).not.toBeNull();
      } finally {
        await db.close();
      }
      await control.setFaults({});
      const resumed = await runCli(['sync', 'reviews'], env);
      expect(resumed.stderr).toBe('');
      // The stopped walk resumed from its checkpoint: it fetched exactly what the first run had not stored.
      const total = (await control.visibleReviews(sandbox.companyId)).length;
      expect(resumed.stdout).toMatch(new RegExp(`^reviews: success .*fetched=${total - stored}\\b`));
      expect(resumed.stdout).toContain('resumed=1');
    } finally {
      await control.setFaults({});
    }
  });

  it('stops at once when a job is waiting out a back-off, instead of sleeping through it', async () => {
    // The platform asks for an hour's wait, and the shutdown grace is an hour too: only a
    // shutdown that cuts back-offs short can end this process within the test.
    const { env, adminPort, schema } = await daemonEnv({
      API_RETRY_BUDGET_SECONDS: '7200',
      SHUTDOWN_GRACE_SECONDS: '3600',
      SYNC_DIRECTORY_CRON: 'off',
      LOG_LEVEL: 'warn',
    });
    await control.setFaults({
      partner: { error429: 1, retryAfterSeconds: 3600, routes: ['/api/v1/partner/reviews'] },
    });
    const daemon = new CliProcess(['run'], env);
    try {
      await waitForHttp(`http://127.0.0.1:${adminPort}/healthz`, 30_000);
      await waitFor(() => daemon.stdout.includes('partner API request failed; retrying'), 30_000);
      daemon.kill('SIGTERM');
      const exit = await daemon.exited;
      expect(exit).toMatchObject({ code: 0, signal: null });
      const db = await openDb({ url: TEST_DATABASE_URL, schema, poolMax: 1, dataDir: env.DATA_DIR });
      try {
        const run = await db
          .knex(db.table('sync_runs'))
          .where({ job: 'reviews' })
          .orderBy('id', 'desc')
          .first();
        // Cut short by the shutdown: interrupted, not failed, saying what it waited out.
        expect(run).toMatchObject({ outcome: 'interrupted', error_kind: null });
        expect(run.error).toBe('GET /reviews answered 429 (not retried: shutting down)');
      } finally {
        await db.close();
      }
    } finally {
      daemon.kill('SIGKILL');
      await control.setFaults({});
    }
  }, 60_000);
});
