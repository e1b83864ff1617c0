import { once } from 'node:events';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { valueWithin } from '../../src/boundedWait.js';
import { makeContext } from '../../src/context.js';
import { startDaemon } from '../../src/daemon.js';
import { type Db, openDb } from '../../src/db/connect.js';
import { CliProcess, freePort, runCli } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema, POSTGRES_URL, TEST_DATABASE_URL } from '../helpers/db.js';
import { testSandbox } from '../helpers/sandbox.js';
import { startTcpProxy } from '../helpers/tcpProxy.js';
import { waitFor } from '../helpers/wait.js';

/** What a probe or Prometheus sees on the admin port: status, and the body (JSON when it is). */
async function admin(port: number, path: string): Promise<{ status: number; body: unknown; text: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(3_000) });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, body, text };
}

/** Whether anything still listens on `port` (a refused connection: nothing). */
async function listening(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(3_000) }).then(
    () => true,
    () => false,
  );
}

/**
 * What start-up looks like from the admin port while it waits on `doing`: alive for a liveness
 * probe (else it is killed, and the wait becomes a crash loop), not ready, metrics served.
 */
async function expectStartingAdmin(port: number, doing: RegExp): Promise<void> {
  const health = await admin(port, '/healthz');
  expect(health.status).toBe(200);
  expect(health.body).toEqual({ status: 'starting', doing: expect.stringMatching(doing) });
  const ready = await admin(port, '/readyz');
  expect(ready.status).toBe(503);
  expect(ready.body).toEqual({ status: 'starting', problems: [expect.stringMatching(doing)] });
  const metrics = await admin(port, '/metrics');
  expect(metrics.status).toBe(200);
  expect(metrics.text).toMatch(/^review_mirror_process_cpu_seconds_total \d/m);
  expect(metrics.text).toContain('review_mirror_build_info{');
}

/** Another session holding `table` locked, as a database that hangs on it would: end it to let go. */
async function lockedByAnother(schema: string, table: string): Promise<pg.Client> {
  const other = new pg.Client({ connectionString: POSTGRES_URL });
  await other.connect();
  await other.query('begin');
  await other.query(`lock table "${schema}".${table} in access exclusive mode`);
  return other;
}

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
      const { rows: started } = await other.query<{ now: Date }>('select clock_timestamp() as now');
      const daemon = new CliProcess(['run'], setup.env);
      // Trying for the lock for a second already: it is polled for, so nothing queues in pg_locks
      // (other test files' daemons wait that long only on locks of their own, held for them).
      await waitFor(async () => {
        const { rows } = await other.query(
          `select 1 from pg_stat_activity
            where application_name = 'review-mirror' and backend_start >= $1
              and query like '%pg_try_advisory_xact_lock%'
              and xact_start < now() - interval '1 second'`,
          [started[0]!.now],
        );
        return rows.length > 0;
      }, 20_000);
      await expectStartingAdmin(setup.adminPort, /migrations.*another replica/);
      const signalledAt = Date.now();
      daemon.kill('SIGTERM');
      const result = await daemon.exited;
      const tookMs = Date.now() - signalledAt;

      expect(result.code).toBe(0);
      expect(tookMs).toBeLessThan(3_000);
      expect(await listening(setup.adminPort)).toBe(false);
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

  it('ends at once on SIGTERM while the webhook receiver waits for its secrets from a database that hangs', async () => {
    const setup = await daemonSetup(
      { url: `http://127.0.0.1:${await freePort()}`, apiKey: 'sk_test_startup' },
      { DATABASE_URL: POSTGRES_URL, LOG_LEVEL: 'info', SHUTDOWN_GRACE_SECONDS: '3' },
    );
    schemas.push(setup.schema);
    const migrated = await runCli(['migrate'], setup.env);
    expect(migrated.code, migrated.stderr).toBe(0);
    // Reading the stored signing secrets waits on this lock, as on a database that hangs.
    const other = await lockedByAnother(setup.schema, 'webhooks');
    // Let go after a while whatever happens, so a daemon that ignores the signal still ends.
    const letGo = setTimeout(() => void other.end(), 30_000);
    const daemon = new CliProcess(['run'], setup.env);
    try {
      await waitFor(async () => {
        const health = await admin(setup.adminPort, '/healthz').catch(() => undefined);
        return (health?.body as { doing?: string } | undefined)?.doing?.includes('webhook receiver');
      }, 30_000);
      // Still there: the secrets are not read yet.
      await new Promise((resolve) => setTimeout(resolve, 500));
      await expectStartingAdmin(setup.adminPort, /webhook receiver/);
      const signalledAt = Date.now();
      daemon.kill('SIGTERM');
      const result = await daemon.exited;
      expect(Date.now() - signalledAt).toBeLessThan(5_000);
      expect(result.code, result.stdout).toBe(0);
      expect(result.stdout).toContain('"msg":"shutting down"');
      expect(result.stdout).not.toContain('webhook receiver listening');
      expect(await listening(setup.adminPort)).toBe(false);
    } finally {
      clearTimeout(letGo);
      daemon.kill('SIGKILL');
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
      await expectStartingAdmin(setup.adminPort, /waiting for the database/);
      proxy.up();
      await waitFor(() => daemon.stdout.includes('"msg":"database ready"'), 40_000);
      // Ready once started, with the readiness of the running daemon (the database answers).
      const ready = await waitFor(async () => {
        const res = await admin(setup.adminPort, '/readyz');
        return res.status === 200 ? res : undefined;
      }, 20_000);
      expect(ready.body).toEqual({ status: 'ready' });
      expect((await admin(setup.adminPort, '/healthz')).body).toEqual({ status: 'ok' });
      daemon.kill('SIGTERM');
      const result = await daemon.exited;
      expect(result.code, result.stdout).toBe(0);
    } finally {
      daemon.kill('SIGKILL');
      await proxy.close();
    }
  }, 90_000);

  /**
   * Two ways a database is not usable yet that start-up must wait out as it does a refusal, where
   * it exited 1 (a crash loop): a server that accepts the connection and never answers (PgBouncer
   * in front of a PostgreSQL that is down, a firewall that drops), whose connect times out after
   * 10 s; and a server with no connection slot free (53300: max_connections reached while a
   * rolling deploy doubles the replicas, or the role's connection limit).
   */
  it('waits for a database whose connections time out, and for one with no connection slot free', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
    });
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const role = `rm_full_${process.pid}`;
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    await admin.query(`create role ${role} login connection limit 0`);
    const full = new URL(POSTGRES_URL);
    full.username = role;
    const daemons: CliProcess[] = [];
    try {
      for (const url of [
        `postgres://postgres@127.0.0.1:${(silent.address() as AddressInfo).port}/test`,
        full.href,
      ]) {
        const setup = await daemonSetup(
          { url: `http://127.0.0.1:${await freePort()}`, apiKey: 'sk_test_startup' },
          { DATABASE_URL: url, LOG_LEVEL: 'info' },
        );
        schemas.push(setup.schema);
        daemons.push(new CliProcess(['run'], setup.env));
      }
      for (const daemon of daemons) {
        await waitFor(() => daemon.stdout.includes('database unreachable; start-up waits for it'), 30_000);
        expect(daemon.child.exitCode, daemon.stdout).toBeNull();
        daemon.kill('SIGTERM');
        expect((await daemon.exited).code).toBe(0);
      }
    } finally {
      for (const daemon of daemons) daemon.kill('SIGKILL');
      for (const socket of sockets) socket.destroy();
      silent.close();
      await admin.query(`drop role if exists ${role}`);
      await admin.end();
    }
  }, 60_000);

  /**
   * A network with no route to the database (ENETUNREACH: an interface or route not up yet as the
   * container starts, a VPN or peering coming up) is a database not reached, like a refusal: start-up
   * waits, where it exited 1 (a crash loop). Linux refuses a TCP connect to the broadcast address
   * with exactly that error. In process: the wait is what is tested, not the CLI around it.
   */
  it('waits for a database whose network is unreachable (ENETUNREACH)', async () => {
    const setup = await daemonSetup(
      { url: `http://127.0.0.1:${await freePort()}`, apiKey: 'sk_test_startup' },
      { DATABASE_URL: 'postgres://postgres@255.255.255.255:5432/test', LOG_LEVEL: 'info' },
    );
    const lines: string[] = [];
    const stdout = new Writable({
      write(chunk, _encoding, done) {
        lines.push(
          ...String(chunk)
            .split('\n')
            .filter((line) => line !== ''),
        );
        done();
      },
    });
    const shutdown = new AbortController();
    let settled: unknown;
    const started = startDaemon(makeContext(setup.env, stdout), shutdown.signal).then(
      (daemon) => {
        settled = 'started';
        return daemon.stop('test');
      },
      (error: unknown) => {
        settled = error;
      },
    );
    try {
      await waitFor(
        () => settled !== undefined || lines.some((l) => l.includes('start-up waits for it')),
        20_000,
      );
      expect(settled).toBeUndefined();
      const waiting = lines.map((l) => JSON.parse(l) as { msg: string; err?: string });
      expect(waiting.find((l) => l.msg === 'database unreachable; start-up waits for it')?.err).toMatch(
        /ENETUNREACH/,
      );
      const health = await admin(setup.adminPort, '/healthz');
      expect(health.body).toEqual({
        status: 'starting',
        doing: expect.stringMatching(/waiting for the database/),
      });
    } finally {
      shutdown.abort(new Error('test over'));
      await started;
    }
    expect(settled).toMatchObject({ name: 'StartupInterrupted', clean: true });
  });

  it('ends at once on SIGTERM while it waits for a database that is down, closing the admin server', async () => {
    const proxy = await startTcpProxy();
    proxy.down();
    const setup = await daemonSetup(
      { url: `http://127.0.0.1:${await freePort()}`, apiKey: 'sk_test_startup' },
      {
        DATABASE_URL: proxy.url(new URL(POSTGRES_URL).pathname.slice(1)),
        LOG_LEVEL: 'info',
        SHUTDOWN_GRACE_SECONDS: '3',
      },
    );
    schemas.push(setup.schema);
    const daemon = new CliProcess(['run'], setup.env);
    try {
      // Past the first retries, into a wait of several seconds.
      await waitFor(() => daemon.stdout.split('start-up waits for it').length > 3, 30_000);
      await expectStartingAdmin(setup.adminPort, /waiting for the database/);
      const signalledAt = Date.now();
      daemon.kill('SIGTERM');
      const result = await daemon.exited;
      expect(Date.now() - signalledAt).toBeLessThan(2_000);
      expect(result.code, result.stdout).toBe(0);
      expect(result.stdout).toContain('"msg":"shutting down"');
      expect(await listening(setup.adminPort)).toBe(false);
    } finally {
      daemon.kill('SIGKILL');
      await proxy.close();
    }
  }, 60_000);
});

/**
 * A start-up that fails with no signal must end the process like any stop does: a query still
 * waiting on the database (one start-up stopped waiting for) keeps its connection, and with it
 * the event loop, alive, and stopping gives up on closing it at its deadline.
 */
describe('`run` whose start-up fails on its own', () => {
  const schemas: string[] = [];
  afterAll(async () => {
    for (const schema of schemas) await dropSchema(schema, POSTGRES_URL);
  });

  it('exits 1 with one line on stderr even with a database query still waiting', async () => {
    // Taken: the webhook receiver cannot listen, the last step of start-up that can fail.
    const taken = createServer();
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const setup = await daemonSetup(
      { url: `http://127.0.0.1:${await freePort()}`, apiKey: 'sk_test_startup' },
      {
        DATABASE_URL: POSTGRES_URL,
        HTTP_PORT: String((taken.address() as AddressInfo).port),
        DB_STATEMENT_TIMEOUT_SECONDS: '0',
        SHUTDOWN_GRACE_SECONDS: '1',
        LOG_LEVEL: 'info',
      },
    );
    schemas.push(setup.schema);
    const migrated = await runCli(['migrate'], setup.env);
    expect(migrated.code, migrated.stderr).toBe(0);
    // The first read of the freshness gauges waits on this lock, as on a database that hangs:
    // start-up goes on without it after its bound, and the query stays on its connection.
    const other = await lockedByAnother(setup.schema, 'sync_state');
    const daemon = new CliProcess(['run'], setup.env);
    try {
      // A deadline, not a timed assertion: without a bound the process lasts as long as the lock.
      const exited = await valueWithin(daemon.exited, 45_000, undefined);
      expect(exited, `still running; stdout:\n${daemon.stdout}\nstderr:\n${daemon.stderr}`).toBeDefined();
      expect(exited!.code, exited!.stdout).toBe(1);
      const lines = exited!.stderr.split('\n').filter((line) => line !== '');
      expect(lines, exited!.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/^review-mirror: .*EADDRINUSE/);
      expect(exited!.stdout).toContain('"reason":"start-up failed"');
    } finally {
      daemon.kill('SIGKILL');
      await other.end().catch(() => {});
      taken.close();
    }
  }, 90_000);
});

/**
 * A deploy while a job waits out the platform's back-off: shutdown cuts the wait short (it would
 * outlast any grace period), and the run it ends is interrupted by the shutdown, not failed. Two
 * deploys during the daily reconcile paged as a job that keeps failing. In process, on the
 * configured database: the wiring of `startDaemon` is what is tested.
 */
describe('`run` told to stop while a job waits out a back-off', () => {
  it('records and counts the run it cuts short as interrupted', async () => {
    const sandbox = await testSandbox({ seedReviews: 30, seed: 12 });
    await sandbox.control.setFaults({
      partner: { error429: 1, retryAfterSeconds: 3600, routes: ['/api/v1/partner/reviews'] },
    });
    const setup = await daemonSetup(sandbox, {
      API_RETRY_BUDGET_SECONDS: '7200',
      SHUTDOWN_GRACE_SECONDS: '3600',
      SYNC_DIRECTORY_CRON: 'off',
      LOG_LEVEL: 'info',
    });
    const lines: string[] = [];
    const stdout = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    let db: Db | undefined;
    try {
      const daemon = await startDaemon(makeContext(setup.env, stdout));
      try {
        await waitFor(() => lines.some((l) => l.includes('partner API request failed; retrying')), 30_000);
      } finally {
        expect(await daemon.stop('deploy')).toBe(true);
      }
      const metrics = await daemon.metrics.registry.metrics();
      expect(metrics).toContain('review_mirror_job_runs_total{sync_job="reviews",outcome="interrupted"} 1');
      expect(metrics).toContain(
        'review_mirror_job_runs_total{sync_job="reviews",outcome="retryable_failure"} 0',
      );
      db = await openDb({ url: TEST_DATABASE_URL, schema: setup.schema, poolMax: 1, dataDir: setup.dataDir });
      const run = await db
        .knex(db.table('sync_runs'))
        .where({ job: 'reviews' })
        .orderBy('id', 'desc')
        .first();
      expect(run).toMatchObject({ outcome: 'interrupted', error_kind: null });
      expect(run.error).toBe('GET /reviews answered 429 (not retried: shutting down)');
    } finally {
      await db?.close();
      await sandbox.close();
      await dropSchema(setup.schema);
    }
  });
});
