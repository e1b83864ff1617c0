import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type { Db } from './connect.js';

/**
 * The SQL convention: every query lives in a `<family>Sql.ts` module in the folder that owns the
 * table, as `verbNoun(q: Queryable, db: Tables, ...args)`. `q` is the knex instance or a
 * transaction (so the caller decides what commits together); `db.table(name)` qualifies names,
 * since we never rely on search_path.
 */
export type Queryable = Knex | Knex.Transaction;

/** What a SQL module needs of the open database: schema-qualified table names, and how statements run. */
export type Tables = Pick<Db, 'table' | 'schema' | 'namedStatements'>;

const statementNames = new Map<string, string>();

/**
 * `q.raw(sql, bindings)` as a named prepared statement where the connection can keep one: the
 * server then parses and plans it once per connection instead of on every call. For a frequent
 * statement of a few rows that is a large part of its cost on the server (the webhook inbox's
 * commit of eight deliveries: a third of PostgreSQL's CPU, docs/benchmarks.md). Only for a text
 * that is the same on every call: its name is derived from it, and its `??` identifiers must be
 * this database's tables (one pool, one schema), so one name never means two statements.
 */
export function preparedRaw(
  q: Queryable,
  db: Tables,
  sql: string,
  bindings: readonly Knex.RawBinding[],
): Knex.Raw {
  const raw = q.raw(sql, bindings);
  if (!db.namedStatements) return raw;
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `review_mirror_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}`;
    statementNames.set(sql, name);
  }
  return raw.options({ name });
}
