import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { CLI, cliEnv } from '../helpers/cli.js';

/** The `review-mirror` bin as npx and a shell run it: through its shebang, so it must be executable. */
describe('the review-mirror bin', () => {
  it('runs directly and lists every command', async () => {
    const { stdout } = await promisify(execFile)(CLI, ['--help'], { env: cliEnv({}) });
    for (const command of ['migrate', 'status', 'sync', 'run', 'sandbox', 'webhooks', 'demo']) {
      expect(stdout).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    }
  });
});
