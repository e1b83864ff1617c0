import type { Knex } from 'knex';
import { type Migration, migrations } from '../../migrations/index.js';
import { pause } from '../boundedWait.js';
import type { Db } from './connect.js';

/** knex's migration source, handing each migration the schema it must create its tables in. */
function sourceFor(schema: string): Knex.MigrationSource<Migration> {
  return {
    getMigrations: async () => [...migrations],
    getMigrationName: (m) => m.name,
    getMigration: async (m) => ({ up: (knex: Knex) => m.up(knex, schema), down: async () => {} }),
  };
}

const migratorConfig = (schema: string): Knex.MigratorConfig => ({
  migrationSource: sourceFor(schema),
  schemaName: schema,
  tableName: 'knex_migrations',
});

/** The first pause between two tries for the migration lock; each pause is longer, up to the last. */
const LOCK_RETRY_FIRST_MS = 50;
const LOCK_RETRY_MAX_MS = 250;
/**
 * How long a migration waits for another's before it fails: as long as the blocking lock call it
 * replaced could wait under the default statement timeout. Replicas migrating at once wait
 * seconds; a session left holding the lock (a psql in an open transaction) must not stall
 * start-up for ever, silently.
 */
const LOCK_WAIT_MAX_MS = 300_000;

export interface MigrateOptions {
  /**
   * Gives the migration up, with the signal's reason, while it waits for another process's: the
   * transaction is rolled back and its connection handed back at once (see `takeMigrationLock`).
   * A migration already holding the lock goes on to its end.
   */
  signal?: AbortSignal;
  /** How long to wait for another process's migration before failing; five minutes by default. */
  lockWaitMs?: number;
}

/**
 * Brings the schema up to date and returns the names it applied. Everything, knex's own tables
 * included, happens in one transaction holding a transaction-level advisory lock: concurrent
 * callers (replicas starting at once) wait for it and the later ones find nothing left to do. A
 * session lock would not do: behind a transaction pooler it stays on a server connection that
 * the pooler hands to the next replica, who then "holds" it too.
 */
export async function migrate(db: Db, options: MigrateOptions = {}): Promise<string[]> {
  const { signal, lockWaitMs = LOCK_WAIT_MAX_MS } = options;
  // Given up before it began: no connection is taken at all.
  signal?.throwIfAborted();
  return db.knex.transaction(async (trx) => {
    const key = `review-mirror:migrate:${db.schema}`;
    if (!(await takeMigrationLock(trx, key, lockWaitMs, signal))) {
      throw new Error(
        `another session has held the migration lock of schema ${db.schema} for over ${Math.round(lockWaitMs / 1000)} s: ` +
          "find it with select pid, query from pg_stat_activity where pid in (select pid from pg_locks where locktype = 'advisory' and granted)",
      );
    }
    await trx.raw('create schema if not exists ??', [db.schema]);
    const [, applied] = (await trx.migrate.latest(migratorConfig(db.schema))) as [number, string[]];
    return applied;
  });
}

/**
 * Takes the transaction-level lock `key`, trying again after a short pause while another
 * transaction holds it, for up to `waitMs` (then false), and throws `signal`'s reason as soon as
 * it aborts (the caller's transaction then rolls back). Never `pg_advisory_xact_lock`: a
 * connection queued on it waits on the server for as long as the other process holds the lock,
 * and nothing on this side can end that wait short of cutting the connection, so closing the
 * database would wait all the same. Every try is in the same transaction, so on the same server
 * connection behind a transaction pooler too.
 */
async function takeMigrationLock(
  trx: Knex.Transaction,
  key: string,
  waitMs: number,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  for (let pauseMs = LOCK_RETRY_FIRST_MS; ; pauseMs = Math.min(LOCK_RETRY_MAX_MS, pauseMs * 2)) {
    // Also once the connection is there: the signal may have come while the pool opened it.
    signal?.throwIfAborted();
    const { rows } = (await trx.raw('select pg_try_advisory_xact_lock(hashtextextended(?, 0)) as locked', [
      key,
    ])) as { rows: Array<{ locked: boolean }> };
    if (rows[0]?.locked === true) return true;
    if (Date.now() >= deadline) return false;
    await pause(pauseMs, signal);
  }
}

export async function pendingMigrations(db: Db): Promise<string[]> {
  const exists = await db.knex.schema.withSchema(db.schema).hasTable('knex_migrations');
  if (!exists) return migrations.map((m) => m.name);
  const [, pending] = (await db.knex.migrate.list(migratorConfig(db.schema))) as [unknown, Migration[]];
  return pending.map((m) => m.name);
}
