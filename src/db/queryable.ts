import type { Knex } from 'knex';
import type { Db } from './connect.js';

/**
 * The SQL convention: every query lives in a `<family>Sql.ts` module in the folder that owns the
 * table, as `verbNoun(q: Queryable, db: Tables, ...args)`. `q` is the knex instance or a
 * transaction (so the caller decides what commits together); `db.table(name)` qualifies names,
 * since we never rely on search_path.
 */
export type Queryable = Knex | Knex.Transaction;

/** What a SQL module needs of the open database: schema-qualified table names. */
export type Tables = Pick<Db, 'table' | 'schema'>;
