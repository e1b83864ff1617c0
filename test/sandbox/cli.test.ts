import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';

const CLI = 'dist/src/cli.js';

describe('review-mirror sandbox (CLI)', () => {
  beforeAll(() => {
    // `npm test` builds first; a bare `vitest run` may find no build yet.
    if (!existsSync('dist/src/commands/sandbox.js'))
      execFileSync('npm', ['run', 'build'], { stdio: 'ignore' });
  });

  it('documents its flags in --help', () => {
    const help = execFileSync('node', [CLI, 'sandbox', '--help'], { encoding: 'utf8' });
    for (const flag of [
      '--port',
      '--host',
      '--seed-reviews',
      '--seed',
      '--api-key',
      '--time-scale',
      '--allow-http-webhooks',
      '--survey-delay-ms',
      '--delivery-timeout-ms',
    ]) {
      expect(help).toContain(flag);
    }
  });

  it('serves seeded reviews under the given key, prints the URL and stops on SIGTERM', async () => {
    const child = spawn(
      'node',
      [CLI, 'sandbox', '--port', '0', '--seed-reviews', '120', '--api-key', 'CLI-KEY'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start-up line: ${output}`)), 15_000);
      child.stdout.on('data', () => {
        const match = /listening on (http:\/\/\S+)/.exec(output);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
    });
    expect(output).toContain('CLI-KEY');
    const response = await fetch(`${url}/api/v1/partner/reviews?limit=100`, {
      headers: { 'x-api-key': 'CLI-KEY' },
    });
    const body = (await response.json()) as { reviews: unknown[]; pagination: { has_more: boolean } };
    expect(body.reviews).toHaveLength(100);
    expect(body.pagination.has_more).toBe(true);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('prints a random key when --api-key is omitted', async () => {
    const child = spawn('node', [CLI, 'sandbox', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await new Promise<void>((resolve) =>
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('control:')) resolve();
      }),
    );
    expect(output).toMatch(/api_key: +rm_test_[0-9a-f]{40}/);
    child.kill('SIGINT');
    expect(await exited).toBe(0);
  });
});
