import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliProcess, cliEnv, freePort } from '../helpers/cli.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A command that applies migrations first (`sync`, `provision`, `contacts push`, `events flush`) and is told to stop while another
 * process migrates the same schema: it stops waiting and exits as an interrupted command does,
 * never going on with its work once the lock is free.
 */
describe('one-shot commands told to stop while another process holds the migration lock', () => {
  const schemas: string[] = [];
  let dir: string;
  let other: pg.Client;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rm-signals-'));
    other = new pg.Client({ connectionString: POSTGRES_URL });
    await other.connect();
  });
  afterAll(async () => {
    await other?.end();
    for (const schema of schemas) await dropSchema(schema, POSTGRES_URL);
    await rm(dir, { recursive: true, force: true });
  });

  const lockKey = (schema: string) => `review-mirror:migrate:${schema}`;

  /** Runs `args` while `other` holds the schema's migration lock; SIGTERM once it queues on it. */
  async function interruptedWhileMigrating(args: string[]) {
    const schema = uniqueSchema('sig');
    schemas.push(schema);
    await other.query('select pg_advisory_lock(hashtextextended($1, 0))', [lockKey(schema)]);
    // Let go after a while whatever happens, so a command that ignores the signal still ends.
    const letGo = setTimeout(
      () => void other.query('select pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(schema)]),
      20_000,
    );
    const cli = new CliProcess(
      args,
      cliEnv({
        DATABASE_URL: POSTGRES_URL,
        DB_SCHEMA: schema,
        DATA_DIR: dir,
        // Nobody answers there: the command must not get as far as asking.
        REVIEWS_API_URL: `http://127.0.0.1:${await freePort()}`,
        REVIEWS_API_KEY: 'sk_test_signals',
        LOG_LEVEL: 'info',
      }),
    );
    try {
      await waitFor(async () => {
        const { rows } = await other.query(
          `select 1 from pg_locks
            where locktype = 'advisory' and not granted
              and ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`,
          [lockKey(schema)],
        );
        return rows.length > 0;
      }, 20_000);
      const signalledAt = Date.now();
      cli.kill('SIGTERM');
      const result = await cli.exited;
      return { result, tookMs: Date.now() - signalledAt };
    } finally {
      clearTimeout(letGo);
      cli.kill('SIGKILL');
      await other.query('select pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(schema)]);
    }
  }

  it('`sync reviews` exits 1, interrupted, without waiting for the lock or starting the job', async () => {
    const { result, tookMs } = await interruptedWhileMigrating(['sync', 'reviews']);
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toContain('interrupted by SIGTERM');
    expect(result.stderr).not.toContain('sync job started');
    expect(tookMs).toBeLessThan(10_000);
  }, 60_000);

  it('`provision` exits 1, interrupted, without waiting for the lock or sending anything', async () => {
    const file = join(dir, 'plan.yaml');
    await writeFile(file, 'locations:\n  - name: Annex\n    slug: annex\n');
    const { result, tookMs } = await interruptedWhileMigrating(['provision', file]);
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toMatch(/provisioning stopped: .*interrupted by SIGTERM/);
    expect(result.stdout).toContain('not-attempted');
    expect(tookMs).toBeLessThan(10_000);
  }, 60_000);

  it('`contacts push` and `events flush` exit 1, interrupted, without waiting for the lock', async () => {
    const file = join(dir, 'export.csv');
    await writeFile(file, 'email,name\nana@example.com,Ana\n');
    for (const args of [
      ['contacts', 'push', file],
      ['events', 'flush'],
    ]) {
      const { result, tookMs } = await interruptedWhileMigrating(args);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(1);
      expect(result.stderr).toContain('SIGTERM');
      expect(tookMs).toBeLessThan(10_000);
    }
  }, 90_000);
});
