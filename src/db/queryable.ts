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
export async function preparedRaw(
  q: Queryable,
  db: Tables,
  sql: string,
  bindings: readonly Knex.RawBinding[],
  // biome-ignore lint/suspicious/noExplicitAny: the driver's result, typed by each caller like q.raw's.
): Promise<any> {
  const raw = q.raw(sql, bindings);
  if (!db.namedStatements) return raw;
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `review_mirror_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}`;
    statementNames.set(sql, name);
  }
  try {
    return await raw.options({ name });
  } catch (error) {
    throw explainPooler(error);
  }
}

/** SQLSTATEs of a named statement that the server connection does not have, or already has. */
const STATEMENT_NAME_ERRORS = new Set(['26000', '42P05']);

/**
 * A named statement that is missing from, or already on, the server connection means the
 * connection changed under the client: DATABASE_URL is a transaction pooler that DB_POOLER does
 * not declare. The error says so, instead of only PostgreSQL's words.
 */
function explainPooler(error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !STATEMENT_NAME_ERRORS.has(code)) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new Error(
    `${message}: DATABASE_URL looks like a transaction pooler; set DB_POOLER=transaction (docs/operations.md)`,
    { cause: error },
  );
}
