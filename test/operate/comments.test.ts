import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { freshDb } from '../helpers/db.js';

/**
 * Every table, view and column explains itself in `\d+` and in BI tools' schema browsers: a
 * migration that adds one without COMMENT ON (migrations/commentOn.ts) fails here.
 */
describe('schema comments', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => {
    await db?.close();
  });

  it('every table and view of the schema has a comment', async () => {
    const { rows } = await db.knex.raw(
      `select c.relname as name, c.relkind as kind, obj_description(c.oid, 'pg_class') as comment
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = ? and c.relkind in ('r', 'p', 'v', 'm', 'f')
        order by 1`,
      [db.schema],
    );
    const names = rows.map((r: { name: string }) => r.name);
    // The views and the core tables are there, so an empty query cannot pass vacuously.
    expect(names).toEqual(
      expect.arrayContaining([
        'reviews',
        'sync_runs',
        'current_reviews',
        'freshness',
        'location_monthly_ratings',
      ]),
    );
    const missing = rows
      .filter((r: { comment: string | null }) => !r.comment?.trim())
      .map((r: { name: string }) => r.name);
    expect(missing).toEqual([]);
  });

  it('every column of every table and view has a comment', async () => {
    const { rows } = await db.knex.raw(
      `select c.relname || '.' || a.attname as name, col_description(c.oid, a.attnum) as comment
         from pg_class c
         join pg_namespace n on n.oid = c.relnamespace
         join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
        where n.nspname = ? and c.relkind in ('r', 'p', 'v', 'm', 'f')
        order by 1`,
      [db.schema],
    );
    expect(rows.length).toBeGreaterThan(100);
    const missing = rows
      .filter((r: { comment: string | null }) => !r.comment?.trim())
      .map((r: { name: string }) => r.name);
    expect(missing).toEqual([]);
  });

  it('information_schema lists the same relations, so BI tools that read it see them all', async () => {
    const tables = await db
      .knex('information_schema.tables')
      .where('table_schema', db.schema)
      .pluck('table_name');
    const { rows } = await db.knex.raw(
      `select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = ? and c.relkind in ('r', 'p', 'v', 'm', 'f')`,
      [db.schema],
    );
    expect([...tables].sort()).toEqual(rows.map((r: { relname: string }) => r.relname).sort());
  });
});
