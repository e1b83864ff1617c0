import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { CliProcess, cliEnv, freePort, waitForHttp } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The real daemon (`node dist/src/cli.js run`) receiving a burst from the sandbox, killed with
 * SIGKILL in the middle of it and restarted on the same port: nothing it acknowledged is lost, and
 * the platform's retries bring in the rest.
 */
describe('daemon killed mid-burst', () => {
  let sandbox: RunningSandbox;
  let control: SandboxControl;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let adminPort: number;
  const schema = uniqueSchema('kill');
  const daemons: CliProcess[] = [];

  beforeAll(async () => {
    // Retries after 0.6 s, 3 s and 18 s: time enough for a restart (an embedded database waits for
    // the crashed holder's lock to go stale), short enough for a test.
    sandbox = await startSandbox({ port: 0, timeScale: 0.01, allowHttpWebhooks: true });
    control = new SandboxControl(sandbox.url);
    dataDir = await mkdtemp(join(tmpdir(), 'rm-kill-'));
    const httpPort = await freePort();
    adminPort = await freePort();
    env = cliEnv({
      DATABASE_URL: TEST_DATABASE_URL,
      DATA_DIR: dataDir,
      DB_SCHEMA: schema,
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: String(httpPort),
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      REVIEWS_API_URL: sandbox.url,
      REVIEWS_API_KEY: sandbox.apiKey,
      WEBHOOK_PUBLIC_URL: `http://127.0.0.1:${httpPort}/webhooks/review-created`,
      SYNC_REVIEWS_CRON: 'off',
      SYNC_DIRECTORY_CRON: 'off',
      SYNC_RECONCILE_CRON: 'off',
      WEBHOOK_HEALTH_CRON: 'off',
      LOG_LEVEL: 'error',
    });
  });
  afterAll(async () => {
    for (const d of daemons) {
      d.kill('SIGKILL');
      await d.exited;
    }
    await sandbox?.close();
    await dropSchema(schema);
    await rm(dataDir, { recursive: true, force: true });
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
