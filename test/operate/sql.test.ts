import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitPassword } from '../../src/commands/sql.js';
import { CliProcess, cliEnv, runCli } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';
import { syncedMirror } from './syncedMirror.js';

// `sql` is tested on both databases whatever the suite runs on: the machine's server, and a data dir.
const SERVER_URL = TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const PASSWORD = 'pa@ss w0rd';
/** A client key's passphrase (the test server asks for no client certificate: libpq only carries it). */
const SSL_PASSWORD = 'k3y&pass phrase';

/** The URL with a password (the test server trusts local connections, so any password works). */
const withPassword = (url: string) =>
  url.replace('://postgres@', `://postgres:${encodeURIComponent(PASSWORD)}@`);

/** The review-mirror-sql-* entries of the temporary directory, where the service files are made. */
const tmpEntries = async () => (await readdir(tmpdir())).filter((e) => e.startsWith('review-mirror-sql-'));

const countOf = (stdout: string) => Number(/^\s*(\d+)\s*$/m.exec(stdout)?.[1]);

describe('splitPassword', () => {
  it('takes the password out of the URL, decoded, and leaves the rest as it was', () => {
    expect(splitPassword('postgres://u:p%40ss@db:5432/x?sslmode=require')).toEqual({
      url: 'postgres://u@db:5432/x?sslmode=require',
      password: 'p@ss',
    });
    expect(splitPassword('postgresql://u@db/x')).toEqual({ url: 'postgresql://u@db/x', password: undefined });
    expect(splitPassword('postgres://u:secret@/x?host=/run/postgresql')).toEqual({
      url: 'postgres://u@/x?host=/run/postgresql',
      password: 'secret',
    });
  });

  it('takes a password given as a query parameter out too, which pg prefers', () => {
    expect(splitPassword('postgres://u:old@db/x?sslmode=require&password=n%26w&application_name=a')).toEqual({
      url: 'postgres://u@db/x?sslmode=require&application_name=a',
      password: 'n&w',
    });
    expect(splitPassword('postgres://u@db/x?password=only')).toEqual({
      url: 'postgres://u@db/x',
      password: 'only',
    });
    expect(splitPassword('postgres://u:%zz@db/x')).toEqual({ url: 'postgres://u@db/x', password: '%zz' });
  });

  it("takes the client key's passphrase (sslpassword) out too, decoded", () => {
    expect(
      splitPassword('postgres://u:p@db/x?sslmode=verify-full&sslpassword=k3y%26pass%20phrase&sslkey=/k.pem'),
    ).toEqual({
      url: 'postgres://u@db/x?sslmode=verify-full&sslkey=/k.pem',
      password: 'p',
      sslpassword: 'k3y&pass phrase',
    });
  });
});

describe('review-mirror sql on DATABASE_URL', () => {
  let dir: string;
  let schema: string;
  let reviews: number;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sql-cli-'));
    const mirror = await syncedMirror({ url: SERVER_URL, keepSchema: true });
    schema = mirror.db.schema;
    reviews = Number((await mirror.db.knex(mirror.db.table('reviews')).count({ n: '*' }))[0]!.n);
    await mirror.close();
    // A psql in front of the real one that records how it was started (and the service file it
    // was given, while it exists), then runs it; with HOLD_PSQL set it waits to be signalled instead.
    await writeFile(
      join(dir, 'psql'),
      [
        '#!/bin/sh',
        `printf '%s\\n' "$@" > "${dir}/argv"`,
        `printf '%s\\n%s\\n' "$PGPASSWORD" "$PGOPTIONS" > "${dir}/env"`,
        `printf '%s\\n%s\\n' "$PGSERVICEFILE" "$PGSERVICE" > "${dir}/service-env"`,
        `rm -f "${dir}/service" "${dir}/service-mode"`,
        `if [ -n "$PGSERVICEFILE" ]; then cp "$PGSERVICEFILE" "${dir}/service"; stat -c %a "$PGSERVICEFILE" > "${dir}/service-mode"; fi`,
        `if [ -n "$HOLD_PSQL" ]; then touch "${dir}/held"; exec sleep 120; fi`,
        'exec /usr/bin/psql "$@"',
        '',
      ].join('\n'),
    );
    await chmod(join(dir, 'psql'), 0o755);
  }, 120_000);
  afterAll(async () => {
    await dropSchema(schema, SERVER_URL);
    await rm(dir, { recursive: true, force: true });
  });

  const env = () => ({
    ...cliEnv({ DATABASE_URL: withPassword(SERVER_URL), DB_SCHEMA: schema }),
    PATH: `${dir}:${process.env.PATH}`,
  });

  it('runs -c on the mirror, unqualified names resolving to its schema', async () => {
    const result = await runCli(['sql', '-c', 'select count(*) from reviews'], env());
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(countOf(result.stdout)).toBe(reviews);
    expect(reviews).toBeGreaterThan(250);
  });

  it('passes the password in PGPASSWORD, never on the command line', async () => {
    await runCli(['sql', '-c', 'select 1'], env());
    const argv = await readFile(join(dir, 'argv'), 'utf8');
    expect(argv).not.toContain(PASSWORD);
    expect(argv).not.toContain(encodeURIComponent(PASSWORD));
    expect(argv).toContain('select 1');
    const [password, options] = (await readFile(join(dir, 'env'), 'utf8')).split('\n');
    expect(password).toBe(PASSWORD);
    expect(options).toBe(`-c search_path=${schema},public`);
  });

  it("keeps the client key's passphrase off the command line: psql reads it from a 0600 service file, removed after", async () => {
    const withSsl = `${withPassword(SERVER_URL)}?application_name=x&sslpassword=${encodeURIComponent(SSL_PASSWORD)}`;
    const result = await runCli(['sql', '-c', 'select 1'], { ...env(), DATABASE_URL: withSsl });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const argv = await readFile(join(dir, 'argv'), 'utf8');
    expect(argv).toContain('select 1');
    expect(argv).not.toContain('sslpassword');
    expect(argv).not.toContain(encodeURIComponent(SSL_PASSWORD));
    expect(argv).not.toContain(SSL_PASSWORD);
    const [file, service] = (await readFile(join(dir, 'service-env'), 'utf8')).split('\n');
    expect(service).not.toBe('');
    expect(await readFile(join(dir, 'service'), 'utf8')).toBe(`[${service}]\nsslpassword=${SSL_PASSWORD}\n`);
    expect((await readFile(join(dir, 'service-mode'), 'utf8')).trim()).toBe('600');
    expect(existsSync(file!)).toBe(false);
    expect(result.stdout + result.stderr).not.toContain(SSL_PASSWORD);
  });

  it('removes the service file when psql fails, cannot be started, or is told to stop', async () => {
    const withSsl = {
      ...env(),
      DATABASE_URL: `${withPassword(SERVER_URL)}?sslpassword=${encodeURIComponent(SSL_PASSWORD)}`,
    };
    const serviceFile = async () => (await readFile(join(dir, 'service-env'), 'utf8')).split('\n')[0]!;

    const failed = await runCli(['sql', '-c', 'select * from no_such_table'], withSsl);
    expect(failed.code).not.toBe(0);
    expect(failed.stderr).not.toContain(SSL_PASSWORD);
    expect(await serviceFile()).not.toBe('');
    expect(existsSync(await serviceFile())).toBe(false);

    // The recorder is not reached: only that nothing is left in the temporary directory says it.
    const before = new Set(await tmpEntries());
    const missing = await runCli(['sql', '-c', 'select 1'], { ...withSsl, PATH: join(dir, 'no-such-dir') });
    expect(missing.stderr).toContain('psql not found on PATH');
    expect((await tmpEntries()).filter((e) => !before.has(e))).toEqual([]);

    await rm(join(dir, 'held'), { force: true });
    const held = new CliProcess(['sql', '-c', 'select 1'], { ...withSsl, HOLD_PSQL: '1' });
    await waitFor(() => existsSync(join(dir, 'held')), 30_000);
    const file = await serviceFile();
    expect(existsSync(file)).toBe(true);
    held.kill('SIGTERM');
    const stopped = await held.exited;
    // psql was told to stop too, and ended first: the command reports it as a shell would.
    expect(stopped.signal).toBe(null);
    expect(stopped.code).toBe(128 + 15);
    expect(existsSync(file)).toBe(false);
  });

  it("refuses an sslpassword it cannot keep off the command line (a service file cannot carry it, or would shadow the operator's)", async () => {
    const result = await runCli(['sql', '-c', 'select 1'], {
      ...env(),
      DATABASE_URL: `${withPassword(SERVER_URL)}?sslpassword=${encodeURIComponent('ends in a space ')}`,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('sslpassword');
    expect(result.stderr).not.toContain('ends in a space');
    // A service file of the operator's would be shadowed by the one made for the sslpassword.
    const named = await runCli(['sql', '-c', 'select 1'], {
      ...env(),
      DATABASE_URL: `${withPassword(SERVER_URL)}?sslpassword=${encodeURIComponent(SSL_PASSWORD)}`,
      PGSERVICE: 'mirror',
    });
    expect(named.code).toBe(1);
    expect(named.stderr).toContain('put the sslpassword in that service file');
    expect(named.stderr).not.toContain(SSL_PASSWORD);
  });

  it("ends with psql's failure when the query fails", async () => {
    const result = await runCli(['sql', '-c', 'select * from no_such_table'], env());
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('no_such_table');
    expect(result.stderr).not.toContain(PASSWORD);
  });

  it('says how to get psql when it is not installed', async () => {
    const result = await runCli(['sql', '-c', 'select 1'], { ...env(), PATH: join(dir, 'no-such-dir') });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('psql not found on PATH');
  });
});

describe('review-mirror sql on the embedded database', () => {
  let dataDir: string;
  let schema: string;
  let reviews: number;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'sql-embedded-'));
    const mirror = await syncedMirror({ url: undefined, dataDir });
    schema = mirror.db.schema;
    reviews = Number((await mirror.db.knex(mirror.db.table('reviews')).count({ n: '*' }))[0]!.n);
    await mirror.close();
  }, 120_000);
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('serves the data directory to psql over a socket, and releases it afterwards', async () => {
    const env = cliEnv({ DATA_DIR: dataDir, DB_SCHEMA: schema });
    const result = await runCli(['sql', '-c', 'select count(*) from reviews'], env);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(countOf(result.stdout)).toBe(reviews);
    expect(reviews).toBeGreaterThan(250);
    // The views are there too, and the data directory was let go: a second session opens it.
    const again = await runCli(['sql', '-c', 'select count(*) from current_reviews'], env);
    expect(again.code).toBe(0);
    expect(countOf(again.stdout)).toBe(reviews - 3);
  });

  it('says so when there is no embedded database yet', async () => {
    const empty = join(dataDir, 'nothing-here');
    const result = await runCli(['sql', '-c', 'select 1'], cliEnv({ DATA_DIR: empty }));
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`no embedded database in ${empty}`);
  });
});
