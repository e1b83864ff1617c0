import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitPassword } from '../../src/commands/sql.js';
import { cliEnv, runCli } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL } from '../helpers/db.js';
import { syncedMirror } from './syncedMirror.js';

// `sql` is tested on both databases whatever the suite runs on: the machine's server, and a data dir.
const SERVER_URL = TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const PASSWORD = 'pa@ss w0rd';

/** The URL with a password (the test server trusts local connections, so any password works). */
const withPassword = (url: string) =>
  url.replace('://postgres@', `://postgres:${encodeURIComponent(PASSWORD)}@`);

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
    // A psql in front of the real one that records how it was started, then runs it.
    await writeFile(
      join(dir, 'psql'),
      `#!/bin/sh\nprintf '%s\\n' "$@" > "${dir}/argv"\nprintf '%s\\n%s\\n' "$PGPASSWORD" "$PGOPTIONS" > "${dir}/env"\nexec /usr/bin/psql "$@"\n`,
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
