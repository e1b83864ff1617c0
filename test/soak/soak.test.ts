import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL } from '../helpers/db.js';

const SOAK = fileURLToPath(new URL('../../dist/bench/soak.js', import.meta.url));

/**
 * The short soak inside the suite: twenty seconds of everything at once on one replica (the
 * longer one, with two replicas and a database restart, runs after the suite in `.ci/run`). Like
 * the rest of the suite, on the PostgreSQL server of TEST_DATABASE_URL, else on the embedded
 * database (`--embedded`: its "database restart" is a SIGKILL of the daemon).
 */
describe('the soak, short', () => {
  it('ends with the mirror and the platform agreeing exactly, and says so in one line', {
    timeout: 240_000,
  }, async () => {
    const database = TEST_DATABASE_URL === undefined ? ['--embedded'] : [];
    const child = spawn(
      process.execPath,
      [SOAK, '--seconds', '20', '--replicas', '1', '--seed', '21', ...database],
      {
        env: { ...process.env, SOAK_DATABASE_URL: TEST_DATABASE_URL },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(out).toMatch(/^soak: seconds=20 replicas=1 seed=21 .* differences=0$/m);
    expect(code).toBe(0);
  });
});
