import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { migrations } from '../../migrations/index.js';
import { openDb } from '../../src/db/connect.js';
import { migrate, pendingMigrations } from '../../src/db/migrate.js';
import { describeError } from '../../src/errors.js';
import { CliProcess, cliEnv, freePort, runCli, waitForHttp } from '../helpers/cli.js';
import { dropSchema, freshDb, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { startTcpProxy } from '../helpers/tcpProxy.js';

const tempDir = () => mkdtempSync(join(tmpdir(), 'rm-data-'));

async function tablesOf(db: Awaited<ReturnType<typeof freshDb>>): Promise<string[]> {
  const rows = await db
    .knex('information_schema.tables')
    .where({ table_schema: db.schema })
    .orderBy('table_name')
    .pluck('table_name');
  return rows as string[];
}

describe('migrations', () => {
  it('apply once; a second run changes nothing', async () => {
    const db = await freshDb({ migrate: false });
    try {
      expect(await migrate(db)).toEqual(migrations.map((m) => m.name));
      const tables = await tablesOf(db);
      expect(tables).toEqual(expect.arrayContaining(['reviews', 'sync_runs', 'sync_state']));
      expect(await migrate(db)).toEqual([]);
      expect(await tablesOf(db)).toEqual(tables);
      expect(await pendingMigrations(db)).toEqual([]);
    } finally {
      await db.close();
    }
  });
});

describe('a statement the database refuses', () => {
  it("is described by the database's own message, not by its SQL, in and out of a transaction", async () => {
    const db = await freshDb({ migrate: false });
    const failure = (run: () => Promise<unknown>) =>
      run().then(
        () => undefined,
        (e: unknown) => e,
      );
    try {
      const statement = `with input as (\n  select ?::timestamptz as at\n)\nselect at from input`;
      const expected = 'database: date/time field value out of range: "0000-01-01T00:00:00Z"';
      const plain = await failure(() => db.knex.raw(statement, ['0000-01-01T00:00:00Z']));
      expect(describeError(plain)).toBe(expected);
      const inTransaction = await failure(() =>
        db.knex.transaction((trx) => trx.raw(statement, ['0000-01-01T00:00:00Z'])),
      );
      expect(describeError(inTransaction)).toBe(expected);
    } finally {
      await db.close();
    }
  });
});

describe('a query on a connection that freezes', () => {
  it('fails a little after the statement timeout, also behind a transaction pooler', async () => {
    const proxy = await startTcpProxy();
    const dbs = await Promise.all(
      (['none', 'transaction'] as const).map((pooler) =>
        openDb({
          url: proxy.url('test'),
          schema: uniqueSchema(),
          poolMax: 1,
          dataDir: undefined,
          statementTimeoutMs: 1_000,
          pooler,
        }),
      ),
    );
    try {
      await Promise.all(dbs.map((db) => db.knex.raw('select 1'))); // warm pooled connections
      proxy.freeze();
      const startedAt = Date.now();
      const outcomes = await Promise.allSettled(dbs.map((db) => db.knex.raw('select 1')));
      expect(outcomes.map((o) => o.status === 'rejected' && describeError(o.reason))).toEqual([
        'database: Query read timeout',
        'database: Query read timeout',
      ]);
      expect(Date.now() - startedAt).toBeLessThan(20_000);
      // The connection that timed out is not handed out again: a new one answers once the network does.
      proxy.heal();
      for (const db of dbs) expect((await db.knex.raw('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await Promise.all(dbs.map((db) => db.close()));
      await proxy.close();
    }
  }, 40_000);
});

describe('the embedded database through the CLI', () => {
  it('migrates twice and shows an empty status', async () => {
    const dataDir = tempDir();
    const env = cliEnv({ DATA_DIR: dataDir });
    const first = await runCli(['migrate'], env);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^applied: 001_sync_state/);
    const second = await runCli(['migrate'], env);
    expect(second.code).toBe(0);
    expect(second.stdout).toBe('schema is up to date\n');
    const status = await runCli(['status'], env);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain('sync state:');
  });

  it('belongs to one process: a second is refused with the holder named, and the data survives', async () => {
    const dataDir = tempDir();
    const adminPort = await freePort();
    const env = cliEnv({
      DATA_DIR: dataDir,
      ADMIN_PORT: String(adminPort),
      HTTP_PORT: String(await freePort()),
    });
    const daemon = new CliProcess(['run'], env);
    try {
      expect((await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`)).status).toBe(200);
      const refused = await runCli(['migrate'], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`in use by process ${daemon.child.pid}`);
      expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    } finally {
      daemon.kill('SIGTERM');
    }
    expect((await daemon.exited).code).toBe(0);
    const after = await runCli(['migrate'], env);
    expect(after.code).toBe(0);
    expect(after.stdout).toBe('schema is up to date\n');
  });
});

describe('`run`', () => {
  const schema = uniqueSchema();
  afterAll(() => dropSchema(schema));

  it('answers /healthz and /readyz on ADMIN_PORT and exits 0 on SIGTERM within 10 s', async () => {
    const adminPort = await freePort();
    const env = cliEnv({
      DATA_DIR: tempDir(),
      DATABASE_URL: TEST_DATABASE_URL,
      DB_SCHEMA: schema,
      ADMIN_PORT: String(adminPort),
      HTTP_PORT: String(await freePort()),
    });
    const daemon = new CliProcess(['run'], env);
    const health = await waitForHttp(`http://127.0.0.1:${adminPort}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const ready = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
    const metrics = await fetch(`http://127.0.0.1:${adminPort}/metrics`);
    expect(await metrics.text()).toContain('review_mirror_process_cpu_seconds_total');

    daemon.kill('SIGTERM');
    const exit = await Promise.race([
      daemon.exited,
      new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 10_000).unref()),
    ]);
    if (exit === 'timeout') daemon.kill('SIGKILL');
    expect(exit).not.toBe('timeout');
    expect(exit).toMatchObject({ code: 0, signal: null });
  });
});

describe('two `migrate` at once', () => {
  const schema = uniqueSchema();
  const dataDir = tempDir();
  const open = () => openDb({ url: TEST_DATABASE_URL, schema, poolMax: 1, dataDir });
  afterAll(() => dropSchema(schema));

  it('leave one schema: on PostgreSQL both succeed, on the embedded database the later one waits or is refused', async () => {
    const env = cliEnv({ DATABASE_URL: TEST_DATABASE_URL, DB_SCHEMA: schema, DATA_DIR: dataDir });
    const results = await Promise.all([runCli(['migrate'], env), runCli(['migrate'], env)]);
    const outputs = results.map((r) => r.stdout).sort();
    const applied = `applied: ${migrations.map((m) => m.name).join(', ')}\n`;
    if (TEST_DATABASE_URL !== undefined) {
      // The later one queues on the advisory lock, then finds nothing left to do.
      expect(results.map((r) => r.code)).toEqual([0, 0]);
      expect(outputs).toEqual([applied, 'schema is up to date\n']);
    } else {
      const [winner, other] = results[0]!.stdout === applied ? results : [results[1]!, results[0]!];
      expect(winner!.code).toBe(0);
      expect(winner!.stdout).toBe(applied);
      // The data directory lock admits one process; the other got it after the first let go, or gave up.
      if (other!.code === 0) expect(other!.stdout).toBe('schema is up to date\n');
      else expect(other!.stderr).toMatch(/is in use by process \d+/);
    }
    const db = await open();
    try {
      const names = await db.knex(db.table('knex_migrations')).orderBy('id').pluck('name');
      expect(names).toEqual(migrations.map((m) => m.name));
    } finally {
      await db.close();
    }
  });
});
