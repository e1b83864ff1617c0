import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';

/** Who holds the embedded database, written once the lock is taken so a refused process can name it. */
interface LockOwner {
  pid: number;
  hostname: string;
  startedAt: string;
  /**
   * This process's alone: a pid says little across containers (each may be PID 1 under one
   * hostname), so a record is this process's only with its token.
   */
  token: string;
  /** The inode of the lock directory it describes: a record left by an earlier lock describes nothing. */
  lockIno: number;
}

const TOKEN = randomBytes(12).toString('hex');

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
/** How often the holder refreshes the lock's mtime. */
const REFRESH_MS = 30_000;

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
      // Never taken over by proper-lockfile itself, whose removal of a stale lock races another
      // process's (both can end up holding it): staleness is judged by takeOver, atomically.
      stale: Number.MAX_SAFE_INTEGER,
      update: REFRESH_MS,
      // A few seconds: a process that is stopping (a restart) lets go in that time.
      retries: { retries: 7, minTimeout: 250, maxTimeout: 1_000, factor: 1.5 },
      onCompromised: (e) => signal?.onCompromised(e),
    });
  let release: () => Promise<void>;
  try {
    release = await take().catch(async (error: unknown) => {
      if ((error as NodeJS.ErrnoException).code !== 'ELOCKED' || !(await takeOver(dir, lockPath)))
        throw error;
      return take();
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') throw error;
    throw lockedError(dir, await readOwner(dir));
  }
  const owner: LockOwner = {
    pid: process.pid,
    hostname: hostname(),
    startedAt: new Date().toISOString(),
    token: TOKEN,
    lockIno: (await stat(lockPath)).ino,
  };
  // Beside the lock, not inside it: the lock directory must stay empty for its release. Written
  // whole (renamed into place), so a reader never judges a half-written record.
  const pending = `${ownerPath(dir)}.${TOKEN}`;
  await writeFile(pending, JSON.stringify(owner));
  await rename(pending, ownerPath(dir));
  // Whoever took the lock over from under us (it looked stale to them) wrote their record since.
  const recorded = await readOwner(dir);
  if (recorded?.token !== TOKEN || recorded.lockIno !== owner.lockIno) {
    throw lockedError(dir, recorded);
  }
  return async () => {
    // The record before the lock. Left behind, it would name this process, soon exited, and the
    // inode of this lock, which the next lock directory is often given: in the moment between the
    // next holder's taking the lock and writing its own record, a process whose tries ran out
    // would take that live holder for the crashed one the record names, and free its lock.
    if ((await readOwner(dir))?.token === TOKEN) await rm(ownerPath(dir), { force: true });
    await release();
  };
}

function lockedError(dir: string, owner: LockOwner | undefined): DataDirLockedError {
  const who = owner
    ? owner.token === TOKEN
      ? `this process (${owner.pid})`
      : `process ${owner.pid} on ${owner.hostname} (started ${owner.startedAt})`
    : 'another process';
  return new DataDirLockedError(
    `the embedded database in ${dir} is in use by ${who}; stop it, or set DATABASE_URL to use a PostgreSQL server`,
  );
}

/**
 * Frees a lock whose holder is gone, true when it did or when the lock is worth trying again: a
 * holder on this host that no longer runs (crashed), or any holder that stopped refreshing the
 * lock for STALE_MS. Several processes may find the same lock dead at once, and a removal decided
 * on a lock another one has since replaced would free a live lock: so the decision and the removal
 * are made under a second lock (`….takeover`), by one process at a time, on the lock as it is
 * then. Only a takeover removes a lock not its own, and a dead holder's lock changes no more, so
 * the lock judged is the lock removed. The caller then takes the lock as usual, which only one can.
 */
async function takeOver(dir: string, lockPath: string): Promise<boolean> {
  const mutex = `${lockPath}.takeover`;
  if (!(await claimTakeover(mutex))) return true; // another process is taking it over: try again
  try {
    const [lock, owner] = await Promise.all([stat(lockPath).catch(() => undefined), readOwner(dir)]);
    if (lock === undefined) return true; // released meanwhile
    const stale = lock.mtimeMs < Date.now() - STALE_MS;
    const crashed = owner?.lockIno === lock.ino && owner.hostname === hostname() && !isAlive(owner.pid);
    if (!stale && !crashed) return false;
    // The record first: a new lock may get the freed inode, and must not look described by it.
    await rm(ownerPath(dir), { force: true });
    await rm(lockPath, { recursive: true, force: true });
    return true;
  } finally {
    await rm(mutex, { recursive: true, force: true });
  }
}

/**
 * A takeover lasts milliseconds: one whose lock is older than this was left by a process that
 * died taking over, and is cleared.
 */
const TAKEOVER_ABANDONED_MS = 10_000;

/** The takeover lock: created, which only one process can, or false while another holds it. */
async function claimTakeover(mutex: string): Promise<boolean> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await mkdir(mutex);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const held = await stat(mutex).catch(() => undefined);
      if (held !== undefined && held.mtimeMs >= Date.now() - TAKEOVER_ABANDONED_MS) return false;
      await rm(mutex, { recursive: true, force: true });
    }
  }
  return false;
}

const ownerPath = (dir: string) => join(dir, 'review-mirror.lock-owner.json');

/**
 * Whether a holder on this host still runs. Our own pid is never "dead": it is this process, or
 * one in another container under the same hostname; a holder that crashed with our pid is taken
 * over once its lock goes stale.
 */
function isAlive(pid: number): boolean {
  if (pid === process.pid) return true;
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

/** Whether `name`, in a data directory, belongs to its lock (what a wipe of the directory keeps). */
export const isLockFile = (name: string): boolean => name.startsWith('review-mirror.lock');
