import type { Socket } from 'node:net';
import { untilAborted, valueWithin } from '../boundedWait.js';
import type { Db } from '../db/connect.js';
import { migrate } from '../db/migrate.js';

/** How long the migration given up on may take to end once its connection is cut. */
const CUT_MIGRATION_END_MS = 1_000;

/** The connections knex's pool has handed out, as pg's clients (none on the embedded database). */
type PoolInUse = {
  readonly used?: ReadonlyArray<{ readonly resource: { connection?: { stream?: Socket } } }>;
};

/**
 * Applies the migrations before a one-shot command's work, given up as soon as `signal` aborts:
 * another process may hold the migration lock for long, and the command then ends as an
 * interrupted one does. The connection queued on the lock is cut (the server rolls the
 * migration's transaction back): closing the database would wait for that lock all the same.
 * Nothing else runs on the database before the migration, so that connection is the one in use.
 */
export async function migrateUnlessAborted(db: Db, signal: AbortSignal): Promise<void> {
  const migration = migrate(db);
  try {
    await untilAborted(migration, signal);
  } catch (error) {
    if (signal.aborted) {
      const pool = (db.knex.client as { pool?: PoolInUse }).pool;
      for (const { resource } of pool?.used ?? []) resource.connection?.stream?.destroy();
      await valueWithin(
        migration.catch(() => {}),
        CUT_MIGRATION_END_MS,
        undefined,
      );
    }
    throw error;
  }
}
