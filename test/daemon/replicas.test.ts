import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/db/connect.js';
import { CliProcess, freePort, waitForHttp } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema, TEST_DATABASE_URL } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

describe('two `run` replicas started at once', () => {
  let sandbox: TestSandbox;
  let schema: string | undefined;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 50, seed: 8, allowHttpWebhooks: true });
  });
  afterAll(async () => {
    await sandbox?.close();
    if (schema) await dropSchema(schema);
  });

  it('register the webhook of WEBHOOK_PUBLIC_URL exactly once, and never run the health job twice at once', async () => {
    // Every second, so both replicas contend for the health job on many ticks.
    const a = await daemonSetup(sandbox, { WEBHOOK_HEALTH_CRON: '* * * * * *', SYNC_REVIEWS_CRON: 'off' });
    schema = a.schema;
    a.env.WEBHOOK_PUBLIC_URL = a.webhookUrl;
    const bHttp = await freePort();
    const bAdmin = await freePort();
    const b = { ...a.env, HTTP_PORT: String(bHttp), ADMIN_PORT: String(bAdmin) };
    const replicas = [new CliProcess(['run'], a.env), new CliProcess(['run'], b)];
    try {
      if (TEST_DATABASE_URL !== undefined) {
        await waitForHttp(`http://127.0.0.1:${a.adminPort}/healthz`, 30_000);
        await waitForHttp(`http://127.0.0.1:${bAdmin}/healthz`, 30_000);
      } else {
        // The embedded database belongs to one process: whichever replica comes second is refused.
        const refused = await Promise.race(replicas.map((r) => r.exited));
        expect(refused.code).toBe(1);
        expect(refused.stderr).toMatch(/is in use by/);
      }
      await waitFor(async () => (await sandbox.control.truth(sandbox.companyId)).webhooks.length > 0, 30_000);
      await sleep(3_000); // three more ticks of the health job on each replica
      const { webhooks } = await sandbox.control.truth(sandbox.companyId);
      expect(webhooks.map((w) => w.url)).toEqual([a.webhookUrl]);
      if (TEST_DATABASE_URL !== undefined) {
        const db = await openDb({ url: TEST_DATABASE_URL, schema: a.schema, poolMax: 1, dataDir: undefined });
        try {
          const finishedRuns = () =>
            db
              .knex(db.table('sync_runs'))
              .where({ job: 'webhook-health' })
              .whereNotNull('finished_at')
              .orderBy('started_at');
          // On a loaded machine the ticks may come later than the three seconds above allow.
          const runs = await waitFor(async () => {
            const finished = await finishedRuns();
            return finished.length >= 2 && finished;
          }, 30_000);
          for (let i = 1; i < runs.length; i++) {
            expect(runs[i].started_at.getTime()).toBeGreaterThanOrEqual(runs[i - 1].finished_at.getTime());
          }
        } finally {
          await db.close();
        }
      }
    } finally {
      for (const r of replicas) r.kill('SIGTERM');
      await Promise.all(replicas.map((r) => r.exited));
    }
  });
});
