import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
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

/**
 * A holder on another host that stopped refreshing the lock's mtime is presumed dead after this
 * long. It is long because PGlite's WebAssembly work blocks the holder's event loop for seconds at
 * a time (migrations), which also stops the refresh: with a short period a live holder's lock was
 * taken over and two processes wrote one data directory. A holder on this host is judged by its
 * pid instead, at once.
 */
const STALE_MS = 120_000;

/**
 * Makes the embedded database under `dir` belong to this process alone. PGlite has no
 * multi-process safety of its own: two processes writing one data directory corrupt it.
 * Returns the release function.
 */
export async function lockDataDir(dir: string, signal?: { onCompromised: (e: Error) => void }) {
  await mkdir(dir, { recursive: true });
  const lockPath = join(dir, 'review-mirror.lock');
  const take = () =>
    lockfile.lock(dir, {
      lockfilePath: lockPath,
      stale: STALE_MS,
      // A few seconds: a process that is stopping (a restart) lets go in that time.
      retries: { retries: 7, minTimeout: 250, maxTimeout: 1_000, factor: 1.5 },
      onCompromised: (e) => signal?.onCompromised(e),
    });
  let release: () => Promise<void>;
  try {
    release = await take().catch(async (error: unknown) => {
      if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') throw error;
      // A holder on this host that no longer runs crashed (or is this very pid, reused by a
      // restarted container): its lock is taken over at once.
      const owner = await readOwner(dir);
      if (owner === undefined || owner.hostname !== hostname() || isAlive(owner.pid)) throw error;
      await rm(lockPath, { recursive: true, force: true });
      return take();
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

function isAlive(pid: number): boolean {
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readOwner(dir: string): Promise<LockOwner | undefined> {
  try {
    return JSON.parse(await readFile(ownerPath(dir), 'utf8')) as LockOwner;
  } catch {
    return undefined;
  }
}
