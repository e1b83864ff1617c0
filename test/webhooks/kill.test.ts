import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { CliProcess, waitForHttp } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema, TEST_DATABASE_URL } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The real daemon (`node dist/src/cli.js run`) receiving a burst from the sandbox, killed with
 * SIGKILL in the middle of it and restarted on the same port: nothing it acknowledged is lost, and
 * the platform's retries bring in the rest.
 */
describe('daemon killed mid-burst', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let adminPort: number;
  let schema: string;
  const daemons: CliProcess[] = [];

  beforeAll(async () => {
    // Retries after 0.6 s, 3 s and 18 s: time enough for a restart (an embedded database waits for
    // the crashed holder's lock to go stale), short enough for a test.
    sandbox = await testSandbox({ timeScale: 0.01, allowHttpWebhooks: true });
    ({ control } = sandbox);
    const setup = await daemonSetup(sandbox, {
      SYNC_REVIEWS_CRON: 'off',
      SYNC_DIRECTORY_CRON: 'off',
      SYNC_RECONCILE_CRON: 'off',
      WEBHOOK_HEALTH_CRON: 'off',
      LOG_LEVEL: 'error',
    });
    ({ schema, dataDir, adminPort } = setup);
    env = { ...setup.env, WEBHOOK_PUBLIC_URL: setup.webhookUrl };
  });
  afterAll(async () => {
    for (const d of daemons) {
      d.kill('SIGKILL');
      await d.exited;
    }
    await sandbox?.close();
    // Guarded: a failed beforeAll must not be hidden behind a clean-up error.
    if (schema !== undefined) await dropSchema(schema);
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
  });

  const start = async () => {
    const daemon = new CliProcess(['run'], env);
    daemons.push(daemon);
    await waitForHttp(`http://127.0.0.1:${adminPort}/healthz`, 30_000);
    return daemon;
  };

  it('loses nothing it acknowledged, and ends with every review', async () => {
    const first = await start();
    // `run` registers WEBHOOK_PUBLIC_URL itself at start-up.
    await waitFor(async () => (await control.truth(sandbox.companyId)).webhooks.length === 1);

    await control.setFaults({ webhooks: { reorder: true } });
    const submitted = (
      await Promise.all(
        Array.from({ length: 40 }, (_, c) =>
          control.submitReviews(
            sandbox.companyId,
            Array.from({ length: 25 }, (_, i) => ({ comment: `kill ${c}-${i}` })),
          ),
        ),
      )
    ).flat();
    const delivered = async () =>
      (await control.truth(sandbox.companyId)).deliveries.filter((d) => d.state === 'delivered').length;
    await waitFor(async () => (await delivered()) >= 150, 30_000, 5);
    first.kill('SIGKILL');
    const killed = await first.exited;
    expect(killed.signal).toBe('SIGKILL');

    // What the sandbox saw acknowledged before the kill: a 2xx was answered only after COMMIT.
    const truth = await control.truth(sandbox.companyId);
    const acknowledged = truth.deliveries
      .filter((d) => d.attempts.some((a) => a.status !== null && a.status >= 200 && a.status < 300))
      .map((d) => d.review_id);
    expect(acknowledged.length).toBeGreaterThan(0);
    expect(acknowledged.length).toBeLessThan(submitted.length);

    const second = await start();
    await waitFor(
      async () => (await control.truth(sandbox.companyId)).deliveries.every((d) => d.state !== 'pending'),
      60_000,
      100,
    );
    const final = await control.truth(sandbox.companyId);
    expect(final.deliveries.filter((d) => d.state === 'dropped')).toEqual([]);
    // Still exactly one webhook: the restart found its stored registration.
    expect(final.webhooks).toHaveLength(1);

    second.kill('SIGTERM');
    expect((await second.exited).code).toBe(0);

    const db: Db = await openDb({ url: TEST_DATABASE_URL, schema, poolMax: 2, dataDir });
    try {
      const ids = new Set(
        (await db.knex(db.table('reviews')).select('id', 'source')).map((r: { id: string }) => r.id),
      );
      // Nothing re-delivers an acknowledged review (no duplicate fault, no poll): it survived the kill.
      expect(acknowledged.filter((id) => !ids.has(id))).toEqual([]);
      expect(submitted.filter((r) => !ids.has(r.id))).toEqual([]);
      expect(ids.size).toBe(submitted.length);
    } finally {
      await db.close();
    }
  }, 120_000);
});
