import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import lockfile from 'proper-lockfile';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const LOCK_MODULE = fileURLToPath(new URL('../../dist/src/db/dataDirLock.js', import.meta.url));

/**
 * A process that takes the data-directory lock of `dir` (after `before`, its own code), prints
 * REFUSED, or TOOK with when it held the lock (a second) once it let go: a real process, as a
 * replica is. It tries at `startAt`, so that several race.
 */
function lockingProcess(dir: string, before = '', startAt = Date.now()): Promise<string> {
  const script = `
    import * as fs from 'node:fs';
    import { hostname } from 'node:os';
    import { lockDataDir } from ${JSON.stringify(LOCK_MODULE)};
    const dir = ${JSON.stringify(dir)};
    ${before}
    // Everyone loaded: the racers start together.
    await new Promise((r) => setTimeout(r, ${startAt} - Date.now()));
    try {
      const release = await lockDataDir(dir);
      const tookAt = Date.now();
      await new Promise((r) => setTimeout(r, 1000));
      console.log('TOOK ' + tookAt + ' ' + Date.now());
      await release();
    } catch (e) {
      console.log('REFUSED ' + e.message);
    }
    process.exit(0);`;
  return run(process.execPath, ['--input-type=module', '-e', script]).then((r) => r.stdout.trim());
}

/** A pid that no process has any more. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await once(child, 'exit');
  return child.pid!;
}

/** The lock of `dir` as a holder on this host left it: the lock directory and its owner record. */
function leftLock(dir: string, pid: number, token = 'an-earlier-process'): void {
  const lockPath = join(dir, 'review-mirror.lock');
  mkdirSync(lockPath, { recursive: true });
  const owner = {
    pid,
    hostname: hostname(),
    startedAt: '2026-01-01T00:00:00Z',
    token,
    lockIno: statSync(lockPath).ino,
  };
  writeFileSync(join(dir, 'review-mirror.lock-owner.json'), JSON.stringify(owner));
}

describe('the embedded data-directory lock (dist: `npm run build` first)', () => {
  it('is taken over from a crashed holder by one of several processes racing for it, never by two at once', async () => {
    for (let round = 0; round < 3; round++) {
      const dir = mkdtempSync(join(tmpdir(), 'rm-lock-'));
      leftLock(dir, await deadPid());
      const startAt = Date.now() + 1_500;
      const outcomes = await Promise.all(Array.from({ length: 4 }, () => lockingProcess(dir, '', startAt)));
      // Held by one at a time: another may take it once the first let go, never before.
      const held = outcomes
        .filter((o) => o.startsWith('TOOK'))
        .map((o) => o.split(' ').slice(1).map(Number) as [number, number])
        .sort((a, b) => a[0] - b[0]);
      expect(held.length, outcomes.join('\n')).toBeGreaterThan(0);
      for (let i = 1; i < held.length; i++) {
        expect(held[i]![0], outcomes.join('\n')).toBeGreaterThanOrEqual(held[i - 1]![1]);
      }
    }
  }, 60_000);

  it('is let go of with its record: the next holder, before it writes its own, is not taken for the last one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rm-lock-'));
    // A holder takes the lock, lets go and exits.
    expect(await lockingProcess(dir)).toMatch(/^TOOK /);
    expect(existsSync(join(dir, 'review-mirror.lock-owner.json'))).toBe(false);
    // The next holder has taken the lock (its directory, often given the freed inode again) and
    // not yet written its record: a process whose tries run out meanwhile must find it live.
    const lockPath = join(dir, 'review-mirror.lock');
    const release = await lockfile.lock(dir, { lockfilePath: lockPath, stale: Number.MAX_SAFE_INTEGER });
    try {
      expect(await lockingProcess(dir)).toMatch(/^REFUSED .* is in use by another process/);
      expect(existsSync(lockPath)).toBe(true);
    } finally {
      await release();
    }
  }, 30_000);

  it('is not taken from a live holder that has our pid (PID 1 in two containers under one hostname)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rm-lock-'));
    leftLock(dir, 0);
    // The other container's PID 1 holds it: its record names our pid, with its own token.
    const outcome = await lockingProcess(
      dir,
      `const owner = JSON.parse(fs.readFileSync(dir + '/review-mirror.lock-owner.json', 'utf8'));
       fs.writeFileSync(dir + '/review-mirror.lock-owner.json', JSON.stringify({ ...owner, pid: process.pid }));`,
    );
    expect(outcome).toMatch(/^REFUSED .* is in use by process \d+ on /);
  }, 30_000);
});
