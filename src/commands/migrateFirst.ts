import type { Db } from '../db/connect.js';
import { migrate } from '../db/migrate.js';

/**
 * Applies the migrations before a one-shot command's work, given up as soon as `signal` aborts:
 * another process may hold the migration lock for long, and the command then ends as an
 * interrupted one does, with the signal's reason. `migrate` stops waiting for that lock itself
 * and rolls its transaction back, so closing the database does not wait for it either. A
 * migration that got the lock ends first; the command's work then does not start.
 */
export async function migrateUnlessAborted(db: Db, signal: AbortSignal): Promise<void> {
  await migrate(db, { signal });
  signal.throwIfAborted();
}
