import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, runCli } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { seededDataDir } from '../helpers/embeddedTemplate.js';
import { type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';

const KEY = 'rk_live_echoed_7f3a9c';

/** The CLI as an operator runs it, against a platform whose error bodies echo the API key. */
describe('a platform that echoes the API key', () => {
  let platform: FakePlatform;
  const schema = uniqueSchema('echo');
  let dataDir: string;
  beforeAll(async () => {
    platform = await startFakePlatform(({ path }) =>
      path === '/reviews'
        ? {
            status: 400,
            body: { error: `unknown parameter for api key ${KEY} (key=${encodeURIComponent(KEY)})` },
          }
        : { status: 404, body: { error: 'not found' } },
    );
    dataDir = await mkdtemp(join(tmpdir(), 'rm-echo-'));
    if (!TEST_DATABASE_URL) await seededDataDir(dataDir);
  });
  afterAll(async () => {
    await platform?.close();
    await dropSchema(schema);
  });

  it('never shows the key: not in the failing command, not in stored errors, not in status', async () => {
    const env = cliEnv({
      REVIEWS_API_URL: platform.url,
      REVIEWS_API_KEY: KEY,
      DATABASE_URL: TEST_DATABASE_URL,
      DB_SCHEMA: schema,
      DATA_DIR: dataDir,
      LOG_LEVEL: 'trace',
    });
    const sync = await runCli(['sync', 'reviews'], env);
    expect(sync.code).toBe(1);
    expect(sync.stderr).toContain(
      'review-mirror: GET /reviews answered 400: unknown parameter for api key [REDACTED]',
    );
    const status = await runCli(['status'], env);
    const statusJson = await runCli(['status', '--json'], env);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain('[REDACTED]');
    for (const output of [sync.stdout, sync.stderr, status.stdout, status.stderr, statusJson.stdout]) {
      expect(output).not.toContain(KEY);
      expect(output).not.toContain(encodeURIComponent(KEY));
    }
  });
});
