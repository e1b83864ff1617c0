import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';

/** Who holds the embedded database, written inside the lock so a refused process can name it. */
interface LockOwner {
  pid: number;
  hostname: string;
  startedAt: string;
}

export class DataDirLockedError extends Error {
  override readonly name = 'DataDirLockedError';
}

// A crashed holder stops refreshing the lock's mtime; after this long the lock is taken over.
const STALE_MS = 5_000;

/**
 * Makes the embedded database under `dir` belong to this process alone. PGlite has no
 * multi-process safety of its own: two processes writing one data directory corrupt it.
 * Returns the release function.
 */
export async function lockDataDir(dir: string, signal?: { onCompromised: (e: Error) => void }) {
  await mkdir(dir, { recursive: true });
  const lockPath = join(dir, 'review-mirror.lock');
  let release: () => Promise<void>;
  try {
    release = await lockfile.lock(dir, {
      lockfilePath: lockPath,
      stale: STALE_MS,
      // Retrying slightly longer than the stale period lets a restart after a crash succeed.
      retries: { retries: 7, minTimeout: 250, maxTimeout: 1_000, factor: 1.5 },
      onCompromised: (e) => signal?.onCompromised(e),
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') throw error;
    const owner = await readOwner(dir);
    const who = owner
      ? `process ${owner.pid} on ${owner.hostname} (started ${owner.startedAt})`
      : 'another process';
    throw new DataDirLockedError(
      `the embedded database in ${dir} is in use by ${who}; stop it, or set DATABASE_URL to use a PostgreSQL server`,
    );
  }
  const owner: LockOwner = { pid: process.pid, hostname: hostname(), startedAt: new Date().toISOString() };
  // Beside the lock, not inside it: the lock directory must stay empty for its release.
  await writeFile(ownerPath(dir), JSON.stringify(owner));
  return release;
}

const ownerPath = (dir: string) => join(dir, 'review-mirror.lock-owner.json');

async function readOwner(dir: string): Promise<LockOwner | undefined> {
  try {
    return JSON.parse(await readFile(ownerPath(dir), 'utf8')) as LockOwner;
  } catch {
    return undefined;
  }
}
