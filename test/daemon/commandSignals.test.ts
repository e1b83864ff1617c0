import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../../migrations/index.js';
import { valueWithin } from '../../src/boundedWait.js';
import { migrateUnlessAborted } from '../../src/commands/migrateFirst.js';
import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { CliProcess, cliEnv, freePort } from '../helpers/cli.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

const lockKey = (schema: string) => `review-mirror:migrate:${schema}`;

/**
 * A session of its own, as another process migrating a schema would be, holding the migration
 * locks of new schemas; `close` drops every schema it named.
 */
class OtherMigrator {
  readonly client = new pg.Client({ connectionString: POSTGRES_URL });
  private readonly schemas: string[] = [];

  /** A new schema (named from `prefix`) whose migration lock this session holds. */
  async lockNew(prefix: string): Promise<string> {
    const schema = uniqueSchema(prefix);
    this.schemas.push(schema);
    await this.client.query('select pg_advisory_lock(hashtextextended($1, 0))', [lockKey(schema)]);
    return schema;
  }

  async unlock(schema: string): Promise<void> {
    await this.client.query('select pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(schema)]);
  }

  async close(): Promise<void> {
    await this.client.end();
    for (const schema of this.schemas) await dropSchema(schema, POSTGRES_URL);
  }
}

/**
 * Whether a review-mirror connection opened since `since` has been trying for the migration lock
 * for a second at least: the lock is polled for, so no backend queues on it in pg_locks. Another
 * file's process waits that long only if another process holds its own schema's lock.
 */
async function waitingForMigrationLock(client: pg.Client, since: Date): Promise<boolean> {
  const { rows } = await client.query(
    `select 1 from pg_stat_activity
      where application_name = 'review-mirror' and backend_start >= $1
        and query like '%pg_try_advisory_xact_lock%'
        and xact_start < now() - interval '1 second'`,
    [since],
  );
  return rows.length > 0;
}

/**
 * A command that applies migrations first (`sync`, `provision`, `contacts push`, `events flush`) and is told to stop while another
 * process migrates the same schema: it stops waiting and exits as an interrupted command does,
 * never going on with its work once the lock is free.
 */
describe('one-shot commands told to stop while another process holds the migration lock', () => {
  let dir: string;
  const other = new OtherMigrator();
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rm-signals-'));
    await other.client.connect();
  });
  afterAll(async () => {
    await other.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Runs `args` while `other` holds the schema's migration lock; SIGTERM once it waits for it. */
  async function interruptedWhileMigrating(args: string[]) {
    const schema = await other.lockNew('sig');
    // Let go after a while whatever happens, so a command that ignores the signal still ends.
    const letGo = setTimeout(() => void other.unlock(schema), 20_000);
    const { rows } = await other.client.query<{ now: Date }>('select clock_timestamp() as now');
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
      await waitFor(() => waitingForMigrationLock(other.client, rows[0]!.now), 20_000);
      const signalledAt = Date.now();
      cli.kill('SIGTERM');
      const result = await cli.exited;
      return { result, tookMs: Date.now() - signalledAt };
    } finally {
      clearTimeout(letGo);
      cli.kill('SIGKILL');
      await other.unlock(schema);
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

/** How closing `db` ended: 'closed', or 'still open' after 3 s. */
const closing = (db: Db) =>
  valueWithin(
    db.close().then(() => 'closed'),
    3_000,
    'still open',
  );

/**
 * The signal may come before the pool has opened the migration's connection: nothing is then
 * queued on the server to be cut, so the migration must not queue there at all. The command's
 * `db.close()` ends at once, however long another process holds the lock.
 */
describe('a migration given up before its connection exists', () => {
  const other = new OtherMigrator();
  beforeAll(() => other.client.connect());
  afterAll(() => other.close());

  /** Starts the migration on a pool with no connection yet, and aborts it after `delayMs` (at once: `sync`). */
  async function abortedMigration(schema: string, delayMs: number | 'sync') {
    const db = await openDb({ url: POSTGRES_URL, schema, poolMax: 4, dataDir: undefined });
    const controller = new AbortController();
    const reason = new Error('interrupted by SIGTERM');
    const startedAt = Date.now();
    const migration = migrateUnlessAborted(db, controller.signal);
    if (delayMs === 'sync') controller.abort(reason);
    else setTimeout(() => controller.abort(reason), delayMs);
    const outcome = await migration.then(
      () => 'migrated',
      (error: unknown) => error,
    );
    const closed = await closing(db);
    return { outcome, reason, closed, tookMs: Date.now() - startedAt };
  }

  it('on a server whose lock another process holds: rejects with the reason and closes at once', async () => {
    const schema = await other.lockNew('early');
    try {
      for (const delayMs of ['sync', 0, 5, 20, 300] as const) {
        const { outcome, reason, closed, tookMs } = await abortedMigration(schema, delayMs);
        expect(outcome, `abort after ${delayMs}`).toBe(reason);
        expect(closed, `abort after ${delayMs}`).toBe('closed');
        expect(tookMs).toBeLessThan(3_000);
      }
    } finally {
      await other.unlock(schema);
    }
    // Nothing of the migration was left behind, and nothing of it is still waiting.
    const { rows } = await other.client.query(
      'select 1 from information_schema.schemata where schema_name = $1',
      [schema],
    );
    expect(rows).toEqual([]);
  }, 60_000);

  it('on a server: waits for the lock as long as it is held, then applies everything', async () => {
    const schema = await other.lockNew('late');
    const db = await openDb({ url: POSTGRES_URL, schema, poolMax: 4, dataDir: undefined });
    try {
      const controller = new AbortController();
      let done = false;
      const migration = migrateUnlessAborted(db, controller.signal).finally(() => {
        done = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(done).toBe(false);
      await other.unlock(schema);
      await migration;
      const names = await db.knex(db.table('knex_migrations')).orderBy('id').pluck('name');
      expect(names).toEqual(migrations.map((m) => m.name));
    } finally {
      await other.client.query('select pg_advisory_unlock_all()');
      await db.close();
    }
  }, 30_000);

  it('on a server whose lock is never let go: fails after its bound, naming the schema, and rolls back', async () => {
    const schema = await other.lockNew('held');
    const db = await openDb({ url: POSTGRES_URL, schema, poolMax: 4, dataDir: undefined });
    try {
      const outcome = await migrate(db, { lockWaitMs: 500 }).catch((e: unknown) => e);
      expect(String(outcome)).toContain(`held the migration lock of schema ${schema} for over`);
      const { rows } = await other.client.query(
        'select 1 from information_schema.schemata where schema_name = $1',
        [schema],
      );
      expect(rows).toEqual([]);
    } finally {
      await other.client.query('select pg_advisory_unlock_all()');
      expect(await closing(db)).toBe('closed');
    }
  }, 30_000);

  it('on the embedded database: rejects with the reason when aborted, applies everything when not', async () => {
    // One in-memory database for both: opening one is slow on a busy machine.
    const db = await openDb({
      url: undefined,
      schema: uniqueSchema('embedded'),
      poolMax: 1,
      dataDir: undefined,
    });
    try {
      const reason = new Error('interrupted by SIGTERM');
      const outcome = await migrateUnlessAborted(db, AbortSignal.abort(reason)).catch((e: unknown) => e);
      expect(outcome).toBe(reason);
      await migrateUnlessAborted(db, new AbortController().signal);
      const names = await db.knex(db.table('knex_migrations')).orderBy('id').pluck('name');
      expect(names).toEqual(migrations.map((m) => m.name));
    } finally {
      expect(await closing(db)).toBe('closed');
    }
  }, 120_000);
});
