import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliEnv, runCli } from '../helpers/cli.js';

/** README's first command: `npx review-mirror demo`, on the embedded database, with nothing else running. */
describe('`demo`', () => {
  it('mirrors the seeded feed by polling and live reviews by webhook, then exits 0', async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'rm-demo-')), 'demo');
    const args = ['demo', '--reviews', '300', '--live', '2', '--data-dir', dataDir];
    const result = await runCli(args, cliEnv({}));
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('1. first sync (success): 300 reviews mirrored by polling the feed');
    expect(result.stdout).toMatch(
      /2\. 2 live reviews submitted on the platform; each landed by webhook in: \d+ ms, \d+ ms/,
    );
    expect(result.stdout).toContain('reviews        302 (removed 0; first seen by feed 300, by webhook 2)');
    // Run again: the demo's own directory is wiped and the demo starts over.
    const again = await runCli(args, cliEnv({}));
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('reviews        302 (');
    // The SQL prompt it points at opens this very mirror.
    expect(again.stdout).toContain(`DATA_DIR=${dataDir} npx review-mirror sql`);
    const sql = await runCli(
      ['sql', '-c', 'select count(*) as n from reviews'],
      cliEnv({ DATA_DIR: dataDir }),
    );
    expect(sql.code).toBe(0);
    expect(sql.stdout).toMatch(/^\s*302$/m);
  });

  it('never wipes a directory that is not its own', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rm-demo-foreign-'));
    writeFileSync(join(dir, 'precious.txt'), 'keep me');
    const result = await runCli(['demo', '--data-dir', dir], cliEnv({}));
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `review-mirror: ${dir} exists and is not a demo directory; choose another with --data-dir\n`,
    );
  });
});
