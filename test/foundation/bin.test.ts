import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/program.js';
import { CLI, cliEnv } from '../helpers/cli.js';
import { testSandbox } from '../helpers/sandbox.js';

/** The `review-mirror` bin as npx and a shell run it: through its shebang, so it must be executable. */
describe('the review-mirror bin', () => {
  it('runs directly and lists every command', async () => {
    const { stdout } = await promisify(execFile)(CLI, ['--help'], { env: cliEnv({}) });
    for (const command of ['migrate', 'status', 'sync', 'run', 'sandbox', 'webhooks', 'demo']) {
      expect(stdout).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    }
  });
});

describe('the program', () => {
  it('loads only the command it runs, registered under the name it is run by', async () => {
    const all = (await buildProgram(['node', 'review-mirror'])).commands.map((c) => c.name());
    expect(all).toEqual(expect.arrayContaining(['migrate', 'sync', 'run', 'grant-reader', 'sql']));
    for (const name of all) {
      const program = await buildProgram(['node', 'review-mirror', name, '--help']);
      expect(program.commands.map((c) => c.name())).toEqual([name]);
    }
  });
});

describe('a one-shot command', () => {
  it('logs to stderr, so that stdout carries only its result', async () => {
    const sandbox = await testSandbox({ seedReviews: 50 });
    try {
      const env = cliEnv({
        DATA_DIR: mkdtempSync(join(tmpdir(), 'rm-bin-')),
        REVIEWS_API_URL: sandbox.url,
        REVIEWS_API_KEY: sandbox.apiKey,
        LOG_LEVEL: 'info',
      });
      const { stdout, stderr } = await promisify(execFile)(CLI, ['sync', 'reviews'], { env });
      expect(stdout).toBe('reviews: success pages=1 fetched=50 inserted=50 updated=0\n');
      const logs = stderr
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect(logs.map((l) => l.msg)).toEqual(['sync job started', 'sync job finished']);
    } finally {
      await sandbox.close();
    }
  });
});

describe('a defect that escapes every handler', () => {
  it('ends the process with exit 1 and one scrubbed line on stderr, not a dump of the error', async () => {
    // A throw from a timer, outside any of the program's handlers, with a secret in its message
    // and in a property (as a driver's error may carry a connection string).
    const dir = mkdtempSync(join(tmpdir(), 'rm-escaped-'));
    const preload = join(dir, 'escape.mjs');
    writeFileSync(
      preload,
      `setTimeout(() => { throw Object.assign(new Error('boom sk_escaped_secret_123'), { url: 'postgres://u:sk_escaped_secret_123@h/db' }); }, 300);\n`,
    );
    const failure = await promisify(execFile)(
      process.execPath,
      ['--import', preload, CLI, 'sandbox', '--port', '0'],
      {
        env: cliEnv({ REVIEWS_API_KEY: 'sk_escaped_secret_123', DATA_DIR: dir }),
      },
    ).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stderr).toMatch(/^review-mirror: unexpected failure, stopping: .*boom/);
    expect(failure?.stderr.trim().split('\n')).toHaveLength(1);
    expect(failure?.stderr).not.toContain('sk_escaped_secret_123');
  });
});
