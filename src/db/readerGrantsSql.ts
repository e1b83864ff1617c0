import pg from 'pg';
import type { Queryable } from './queryable.js';

/** Whether a role of that name exists on the server (`public` is not a role: it does not). */
export async function roleExists(q: Queryable, role: string): Promise<boolean> {
  const { rows } = await q.raw('select 1 from pg_roles where rolname = ?', [role]);
  return rows.length > 0;
}

/**
 * Grants `role` read access to `schema`: USAGE, SELECT on every table and view, and the same on
 * those the current user creates later (the daemon's migrations, when it runs as this user).
 * webhooks.signing_secret is withheld: whoever reads it can forge deliveries. One transaction,
 * so a failure grants nothing. Names are quoted as identifiers by pg, never spliced as given.
 */
export async function grantReader(q: Queryable, schema: string, role: string): Promise<void> {
  const s = pg.escapeIdentifier(schema);
  const r = pg.escapeIdentifier(role);
  const webhookColumns: string[] = await q('information_schema.columns')
    .where({ table_schema: schema, table_name: 'webhooks' })
    .whereNot('column_name', 'signing_secret')
    .orderBy('ordinal_position')
    .pluck('column_name');
  await q.transaction(async (trx) => {
    await trx.raw(`grant usage on schema ${s} to ${r}`);
    await trx.raw(`grant select on all tables in schema ${s} to ${r}`);
    await trx.raw(`alter default privileges in schema ${s} grant select on tables to ${r}`);
    if (webhookColumns.length > 0) {
      const table = `${s}.${pg.escapeIdentifier('webhooks')}`;
      await trx.raw(`revoke select on ${table} from ${r}`);
      await trx.raw(
        `grant select (${webhookColumns.map((c) => pg.escapeIdentifier(c)).join(', ')}) on ${table} to ${r}`,
      );
    }
  });
}
