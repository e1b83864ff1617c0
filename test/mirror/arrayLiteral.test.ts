import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { arrayLiteral } from '../../src/mirror/arrayLiteral.js';
import { freshDb } from '../helpers/db.js';

describe('arrayLiteral', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => {
    await db?.close();
  });

  it('round-trips any text, null and the empty array through PostgreSQL', async () => {
    const values = [
      'plain',
      '',
      'NULL',
      null,
      'a "quoted" word',
      'back\\slash and \\" both',
      '{braces}, commas, and  spaces ',
      'line\nbreak\ttab',
      'ünïcödé ★ 🎉',
      '\\',
      '"',
    ];
    const { rows } = await db.knex.raw('select unnest(?::text[]) as v', [arrayLiteral(values)]);
    expect((rows as Array<{ v: string | null }>).map((r) => r.v)).toEqual(values);
    const empty = await db.knex.raw('select cardinality(?::text[]) as n', [arrayLiteral([])]);
    expect(Number(empty.rows[0].n)).toBe(0);
  });

  it('reads back as the column types the upserts cast it to', async () => {
    const { rows } = await db.knex.raw(
      `select (?::uuid[])[1]::text as id, (?::timestamptz[])[1] as at, (?::numeric[])[2]::text as rating,
              (?::boolean[])[1] as yes`,
      [
        arrayLiteral(['6f1c4a2e-8d3b-4c5a-9e7f-0a1b2c3d4e5f']),
        arrayLiteral(['2025-05-31T23:59:43.029Z']),
        arrayLiteral(['5', '4.5']),
        arrayLiteral(['t']),
      ],
    );
    expect(rows[0]).toMatchObject({ id: '6f1c4a2e-8d3b-4c5a-9e7f-0a1b2c3d4e5f', rating: '4.5', yes: true });
    expect(new Date(rows[0].at).toISOString()).toBe('2025-05-31T23:59:43.029Z');
  });
});
