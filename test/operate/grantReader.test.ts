import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, runCli } from '../helpers/cli.js';
import { TEST_DATABASE_URL } from '../helpers/db.js';
import { type SyncedMirror, syncedMirror } from './syncedMirror.js';

// Roles exist only on a PostgreSQL server: this part always runs on the machine's real one.
const SERVER_URL = TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

describe('grant-reader on PostgreSQL', () => {
  let mirror: SyncedMirror;
  // A name that breaks naive quoting: a space, a double quote and a dot.
  const role = `bi "reader".${randomBytes(4).toString('hex')}`;
  const quotedRole = pg.escapeIdentifier(role);
  beforeAll(async () => {
    mirror = await syncedMirror({ url: SERVER_URL });
    await mirror.db.knex.raw(`create role ${quotedRole}`);
  }, 120_000);
  afterAll(async () => {
    await mirror?.db.knex.raw(`drop owned by ${quotedRole}`).catch(() => {});
    await mirror?.db.knex.raw(`drop role if exists ${quotedRole}`).catch(() => {});
    await mirror?.close();
  });

  const env = () => cliEnv({ DATABASE_URL: SERVER_URL, DB_SCHEMA: mirror.db.schema });
  /** Runs `fn` as the reader role, in a transaction rolled back afterwards. */
  const asReader = async <T>(fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> => {
    const trx = await mirror.db.knex.transaction();
    try {
      await trx.raw(`set local role ${quotedRole}`);
      return await fn(trx);
    } finally {
      await trx.rollback();
    }
  };
  const table = (name: string) => mirror.db.table(name);

  it('lets the role read every table and view, and nothing else', async () => {
    await expect(asReader((trx) => trx(table('current_reviews')).count())).rejects.toThrow(
      /permission denied/,
    );

    const result = await runCli(['grant-reader', role], env());
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(role);

    const current = await mirror.db.knex(table('current_reviews')).count({ n: '*' });
    const asRole = await asReader((trx) => trx(table('current_reviews')).count({ n: '*' }));
    expect(Number(asRole[0]!.n)).toBe(Number(current[0]!.n));
    expect(Number(asRole[0]!.n)).toBeGreaterThan(250);
    for (const view of [
      'professional_monthly_ratings',
      'location_monthly_ratings',
      'freshness',
      'reviews',
      'sync_runs',
    ]) {
      expect((await asReader((trx) => trx(table(view)).select())).length, view).toBeGreaterThan(0);
    }
    await expect(
      asReader((trx) => trx(table('sync_state')).insert({ job: 'forged', watermark: new Date() })),
    ).rejects.toThrow(/permission denied/);
    await expect(asReader((trx) => trx(table('reviews')).update({ rating: 1 }))).rejects.toThrow(
      /permission denied/,
    );
    // The signing secrets would let the reader forge deliveries; the rest of the table is readable.
    await expect(asReader((trx) => trx(table('webhooks')).select('signing_secret'))).rejects.toThrow(
      /permission denied/,
    );
    await asReader((trx) => trx(table('webhooks')).select('id', 'url', 'last_error'));
  });

  it('covers tables created later by the same user (default privileges), and is idempotent', async () => {
    expect((await runCli(['grant-reader', role], env())).code).toBe(0);
    await mirror.db.knex.raw('create table ?? (id int)', [table('added_later')]);
    await mirror.db.knex(table('added_later')).insert({ id: 7 });
    expect(await asReader((trx) => trx(table('added_later')).pluck('id'))).toEqual([7]);
    await mirror.db.knex.raw('drop table ??', [table('added_later')]);
  });

  it('names the role when it does not exist, and grants nothing', async () => {
    const missing = `nobody_${randomBytes(4).toString('hex')}`;
    const result = await runCli(['grant-reader', missing], env());
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`role "${missing}" does not exist`);
  });
});

describe('grant-reader on the embedded database', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'grant-reader-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('says it is not applicable, with exit code 2', async () => {
    const result = await runCli(['grant-reader', 'bi'], cliEnv({ DATA_DIR: dir }));
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/not applicable to the embedded database/);
    expect(result.stdout).toBe('');
  });
});
