import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CliProcess, cliEnv, runCli } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

/** The shipped files the demo points at (dashboards, rules, docs), as printed. */
const printedFiles = (stdout: string): string[] => [
  ...new Set(stdout.match(/[\w./-]*(?:config|docs)\/[\w./-]+\.(?:json|yml|md)/g) ?? []),
];

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
    // The dashboards, the alert rules and the docs it points at are there (the test runs in the repository).
    const files = printedFiles(again.stdout);
    expect(files).toEqual(
      expect.arrayContaining([
        'config/grafana/review-mirror.json',
        'config/grafana/review-mirror-reviews.json',
        'config/prometheus/alerts.yml',
        'docs/alerts.md',
        'docs/querying.md',
      ]),
    );
    for (const file of files) expect(existsSync(file), file).toBe(true);
    // The SQL prompt it points at opens this very mirror.
    expect(again.stdout).toContain(`DATA_DIR=${dataDir} npx review-mirror sql`);
    const sql = await runCli(
      ['sql', '-c', 'select count(*) as n from reviews'],
      cliEnv({ DATA_DIR: dataDir }),
    );
    expect(sql.code).toBe(0);
    expect(sql.stdout).toMatch(/^\s*302$/m);
  });

  it('--keep-running serves a live system until SIGTERM, then exits 0; the paths it prints open from any directory', {
    timeout: 120_000,
  }, async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'rm-demo-cwd-'));
    const args = [
      'demo',
      '--reviews',
      '50',
      '--live',
      '1',
      '--data-dir',
      join(cwd, 'demo'),
      '--keep-running',
    ];
    const demo = new CliProcess(args, cliEnv({}), cwd);
    try {
      await waitFor(() => demo.stdout.includes('Ctrl-C stops.') || demo.child.exitCode !== null, 90_000);
      expect(demo.stderr).toBe('');
      expect(demo.child.exitCode).toBe(null);
      const admin = /health, metrics\s+(http:\/\/127\.0\.0\.1:\d+)\/healthz/.exec(demo.stdout)?.[1];
      expect(admin).toBeDefined();
      // Still serving after it printed everything: the daemon and the sandbox stay up.
      expect((await fetch(`${admin}/healthz`)).status).toBe(200);
      expect((await fetch(`${admin}/readyz`)).status).toBe(200);
      expect(await (await fetch(`${admin}/metrics`)).text()).toContain('review_mirror_build_info');
      const files = printedFiles(demo.stdout);
      for (const shipped of [
        'config/grafana/review-mirror.json',
        'config/grafana/review-mirror-reviews.json',
        'config/prometheus/alerts.yml',
      ])
        expect(
          files.some((f) => f.endsWith(shipped)),
          shipped,
        ).toBe(true);
      for (const file of files) expect(existsSync(resolve(cwd, file)), file).toBe(true);

      demo.kill('SIGTERM');
      const exit = await demo.exited; // the test's timeout bounds how long stopping may take
      expect(exit.signal).toBe(null);
      expect(exit.code).toBe(0);
      expect(exit.stderr).toBe('');
      await expect(fetch(`${admin}/healthz`)).rejects.toThrow();
    } finally {
      demo.kill('SIGKILL');
      await demo.exited;
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it('never wipes the directory of a demo still running: a second demo is refused, naming it', {
    timeout: 120_000,
  }, async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'rm-demo-twice-')), 'demo');
    const args = ['demo', '--reviews', '20', '--live', '0', '--data-dir', dataDir];
    const first = new CliProcess([...args, '--keep-running'], cliEnv({}));
    try {
      await waitFor(() => first.stdout.includes('Ctrl-C stops.') || first.child.exitCode !== null, 90_000);
      expect(first.child.exitCode).toBe(null);
      const second = await runCli(args, cliEnv({}));
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(
        new RegExp(
          `^review-mirror: the embedded database in ${dataDir} is in use by process ${first.child.pid} on `,
        ),
      );
      // The first demo's database is still there, and still serves.
      expect(existsSync(join(dataDir, 'pgdata'))).toBe(true);
      const admin = /health, metrics\s+(http:\/\/127\.0\.0\.1:\d+)\/healthz/.exec(first.stdout)?.[1];
      expect((await fetch(`${admin}/readyz`)).status).toBe(200);
      first.kill('SIGTERM');
      expect((await first.exited).code).toBe(0);
    } finally {
      first.kill('SIGKILL');
      await first.exited;
    }
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
