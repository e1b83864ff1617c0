import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { CliProcess, freePort } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema, POSTGRES_URL } from '../helpers/db.js';
import { startTcpProxy } from '../helpers/tcpProxy.js';
import { waitFor } from '../helpers/wait.js';

/** SIGTERM while `run` is still starting: what an orchestrator does to a replica that is slow to come up. */
describe('`run` told to stop during start-up', () => {
  const schemas: string[] = [];
  afterAll(async () => {
    for (const schema of schemas) await dropSchema(schema, POSTGRES_URL);
  });

  it('stops waiting for another replica’s migration, starts no job and exits within the grace period', async () => {
    // A platform nobody answers: the jobs are registered, and would start if the scheduler did.
    const setup = await daemonSetup(
      { url: `http://127.0.0.1:${await freePort()}`, apiKey: 'sk_test_startup' },
      { DATABASE_URL: POSTGRES_URL, LOG_LEVEL: 'info', SHUTDOWN_GRACE_SECONDS: '3' },
    );
    schemas.push(setup.schema);
    // Another replica in the middle of migrating this schema: holding its migration lock.
    const other = new pg.Client({ connectionString: POSTGRES_URL });
    await other.connect();
    await other.query('select pg_advisory_lock(hashtextextended($1, 0))', [
      `review-mirror:migrate:${setup.schema}`,
    ]);
    // Let go after a while whatever happens, so a daemon that ignores the signal still ends.
    const letGo = setTimeout(() => void other.end(), 20_000);
    try {
      const daemon = new CliProcess(['run'], setup.env);
      // Queued on the lock: its connection waits in pg_advisory_xact_lock.
      await waitFor(async () => {
        const { rows } = await other.query(
          "select 1 from pg_stat_activity where application_name = 'review-mirror' and wait_event_type = 'Lock'",
        );
        return rows.length > 0;
      }, 20_000);
      const signalledAt = Date.now();
      daemon.kill('SIGTERM');
      const result = await daemon.exited;
      const tookMs = Date.now() - signalledAt;

      expect(result.code).toBe(0);
      expect(tookMs).toBeLessThan(3_000);
      const messages = result.stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => (JSON.parse(line) as { msg: string }).msg);
      expect(messages).toContain('shutting down');
      expect(messages).not.toContain('sync job started');
      expect(messages).not.toContain('database ready');
    } finally {
      clearTimeout(letGo);
      await other.end().catch(() => {});
    }
  }, 60_000);

  it('waits for a database that is down at start-up, saying so, and starts once it is up', async () => {
    const proxy = await startTcpProxy();
    proxy.down();
    const setup = await daemonSetup(
      { url: `http://127.0.0.1:${await freePort()}`, apiKey: 'sk_test_startup' },
      { DATABASE_URL: proxy.url(new URL(POSTGRES_URL).pathname.slice(1)), LOG_LEVEL: 'info' },
    );
    schemas.push(setup.schema);
    const daemon = new CliProcess(['run'], setup.env);
    try {
      await waitFor(() => daemon.stdout.includes('database unreachable; start-up waits for it'), 20_000);
      expect(daemon.child.exitCode).toBeNull();
      proxy.up();
      await waitFor(() => daemon.stdout.includes('"msg":"database ready"'), 40_000);
      daemon.kill('SIGTERM');
      const result = await daemon.exited;
      expect(result.code, result.stdout).toBe(0);
    } finally {
      daemon.kill('SIGKILL');
      await proxy.close();
    }
  }, 90_000);
});
