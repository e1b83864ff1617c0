import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/db/connect.js';
import { makeRandom } from '../../src/sandbox/random.js';
import { CliProcess, cliEnv } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { seededDataDir } from '../helpers/embeddedTemplate.js';
import { expectExactMirror } from '../helpers/oracle.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';

/** `review-mirror sync reviews` as a real process. */
const startSync = (env: NodeJS.ProcessEnv) => new CliProcess(['sync', 'reviews'], env);

describe('a backfill killed with SIGKILL at random points, then restarted', () => {
  let sandbox: TestSandbox;
  let dataDir: string;
  const schema = uniqueSchema('kill');
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 50_000, seed: 13 });
    dataDir = await mkdtemp(join(tmpdir(), 'review-mirror-kill-'));
    if (!TEST_DATABASE_URL) await seededDataDir(dataDir);
    // Postgres when the suite has one; otherwise an embedded database in a directory of its own.
    env = cliEnv({
      REVIEWS_API_URL: sandbox.url,
      REVIEWS_API_KEY: sandbox.apiKey,
      API_PAGE_SIZE: '100',
      // A killed sync keeps the job's lease until it lapses, and the next one waits for that: at
      // the default 30 s, five kills spent 150 s waiting. The shortest lease keeps it real.
      JOB_LEASE_SECONDS: '3',
      DB_SCHEMA: schema,
      DATABASE_URL: TEST_DATABASE_URL,
      DATA_DIR: dataDir,
    });
  });
  afterAll(async () => {
    await sandbox?.close();
    await dropSchema(schema);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('ends with an exact mirror after at least 5 kills', async () => {
    const random = makeRandom(Date.now());
    const feedPagesServed = async () =>
      (await sandbox.control.requests()).by_route['GET /api/v1/partner/reviews']?.['200'] ?? 0;
    let kills = 0;
    while (kills < 5) {
      // A random point of the walk, counted in pages rather than time so that a fast machine
      // cannot finish the 500-page backfill before the fifth kill (5 x at most 60 pages).
      const target = (await feedPagesServed()) + 1 + Math.floor(random() * 60);
      const run = startSync(env);
      let exited = false;
      void run.exited.then(() => {
        exited = true;
      });
      while (!exited && (await feedPagesServed()) < target) await new Promise((r) => setTimeout(r, 2));
      const killed = run.child.kill('SIGKILL');
      const exit = await run.exited;
      if (exit.signal === 'SIGKILL' && killed) kills++;
      else expect.fail(`the backfill ended before kill ${kills + 1}: ${JSON.stringify(exit)}`);
    }
    const final = startSync(env);
    const exit = await final.exited;
    expect(exit).toMatchObject({ code: 0, signal: null, stderr: '' });

    const db = await openDb({
      url: TEST_DATABASE_URL,
      schema,
      poolMax: 2,
      dataDir: TEST_DATABASE_URL ? undefined : dataDir,
    });
    try {
      expect(await expectExactMirror(db, sandbox)).toBe(50_000);
      const runs = await db.knex(db.table('sync_runs')).select('outcome').orderBy('id');
      expect(runs.at(-1)!.outcome).toBe('success');
      expect(runs.filter((r) => r.outcome === 'interrupted').length).toBeGreaterThanOrEqual(5);
      const state = await db.knex(db.table('sync_state')).where({ job: 'reviews' }).first();
      expect(state.cursor).toBeNull();
    } finally {
      await db.close();
    }
  }, 180_000);

  it('exits non-zero with a one-line reason on a bad key', async () => {
    const run = startSync({ ...env, REVIEWS_API_KEY: 'rm_bad_key_0123456789' });
    const exit = await run.exited;
    expect(exit.code).toBe(1);
    expect(exit.stderr).toBe(
      'review-mirror: the API key is missing, invalid or inactive (GET /reviews answered 401)\n',
    );
  });
});
