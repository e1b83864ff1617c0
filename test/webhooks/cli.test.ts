import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/db/connect.js';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { cliEnv, freePort, runCli } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { seededDataDir } from '../helpers/embeddedTemplate.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

/** `review-mirror webhooks register|list|delete`, the built CLI against the sandbox. */
describe('webhooks command', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  const schema = uniqueSchema('whcli');

  beforeAll(async () => {
    sandbox = await testSandbox({ timeScale: 0.001, allowHttpWebhooks: true });
    ({ control } = sandbox);
    dataDir = await mkdtemp(join(tmpdir(), 'rm-whcli-'));
    if (!TEST_DATABASE_URL) await seededDataDir(dataDir);
    env = cliEnv({
      DATABASE_URL: TEST_DATABASE_URL,
      DATA_DIR: dataDir,
      DB_SCHEMA: schema,
      REVIEWS_API_URL: sandbox.url,
      REVIEWS_API_KEY: sandbox.apiKey,
    });
  });
  afterAll(async () => {
    await sandbox?.close();
    await dropSchema(schema);
    await rm(dataDir, { recursive: true, force: true });
  });

  const storedRow = async (id: string) => {
    const db = await openDb({ url: TEST_DATABASE_URL, schema, poolMax: 1, dataDir });
    try {
      return await db.knex(db.table('webhooks')).where({ id }).first();
    } finally {
      await db.close();
    }
  };

  it('registers, stores the secret without printing it, lists with last_error, and deletes', async () => {
    const closedPort = await freePort(); // nothing listens: every delivery fails
    const url = `http://127.0.0.1:${closedPort}/webhooks/review-created`;
    const registered = await runCli(['webhooks', 'register', '--url', url, '--description', 'cli test'], env);
    expect(registered.stderr).toBe('');
    expect(registered.code).toBe(0);
    const truth = await control.truth(sandbox.companyId);
    expect(truth.webhooks).toHaveLength(1);
    const webhook = truth.webhooks[0]!;
    expect(registered.stdout).toContain(`registered webhook ${webhook.id}`);
    expect(registered.stdout).not.toContain(webhook.signing_secret);
    expect(await storedRow(webhook.id)).toMatchObject({
      url,
      description: 'cli test',
      signing_secret: webhook.signing_secret,
      deleted_at: null,
    });

    const [review] = await control.submitReviews(sandbox.companyId, [{ comment: 'never delivered' }]);
    await waitFor(
      async () =>
        (await control.truth(sandbox.companyId)).deliveries.some(
          (d) => d.review_id === review!.id && d.state === 'dropped',
        ),
      30_000,
    );

    const listed = await runCli(['webhooks', 'list', '--json'], env);
    expect(listed.code).toBe(0);
    const rows = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
    expect(rows).toEqual([
      expect.objectContaining({
        id: webhook.id,
        url,
        state: 'failing',
        is_active: true,
        secret_stored: true,
        last_error: expect.stringContaining('connection error'),
      }),
    ]);
    const table = await runCli(['webhooks', 'list'], env);
    expect(table.stdout).toMatch(
      new RegExp(`${webhook.id}\\s+${url.replaceAll('.', '\\.')}\\s+failing\\s+stored`),
    );
    expect((await storedRow(webhook.id)).last_error).toContain('connection error');
    const status = await runCli(['status', '--json'], env);
    expect(JSON.parse(status.stdout).webhooks.webhooks).toEqual([
      expect.objectContaining({ id: webhook.id, state: 'failing', secret_stored: true }),
    ]);
    expect((await runCli(['status'], env)).stdout).toMatch(
      /webhooks:\n.*failing.*last_error: connection error/,
    );

    const deleted = await runCli(['webhooks', 'delete', webhook.id], env);
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toBe(`deleted webhook ${webhook.id}\n`);
    expect((await control.truth(sandbox.companyId)).webhooks).toEqual([]);
    expect((await storedRow(webhook.id)).deleted_at).not.toBeNull();
    expect((await runCli(['webhooks', 'list'], env)).stdout).toBe('no webhook registered\n');
  });

  it('refuses a non-HTTPS URL with the platform message, and needs the API configured', async () => {
    const refused = await runCli(['webhooks', 'register', '--url', 'http://example.com/hook'], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/422.*HTTPS/);
    const noApi = await runCli(['webhooks', 'list'], { ...env, REVIEWS_API_URL: undefined });
    expect(noApi.code).toBe(2);
    expect(noApi.stderr).toContain('REVIEWS_API_URL');
  });
});
