import type { Knex } from 'knex';
import { type Migration, migrations } from '../../migrations/index.js';
import type { Db } from './connect.js';

/** knex's migration source, handing each migration the schema it must create its tables in. */
function sourceFor(schema: string): Knex.MigrationSource<Migration> {
  return {
    getMigrations: async () => [...migrations],
    getMigrationName: (m) => m.name,
    getMigration: async (m) => ({ up: (knex: Knex) => m.up(knex, schema), down: async () => {} }),
  };
}

const migratorConfig = (schema: string): Knex.MigratorConfig => ({
  migrationSource: sourceFor(schema),
  schemaName: schema,
  tableName: 'knex_migrations',
});

/**
 * Brings the schema up to date and returns the names it applied. Everything, knex's own tables
 * included, happens in one transaction holding a transaction-level advisory lock: concurrent
 * callers (replicas starting at once) queue on it and the later ones find nothing left to do. A
 * session lock would not do: behind a transaction pooler it stays on a server connection that
 * the pooler hands to the next replica, who then "holds" it too.
 */
export async function migrate(db: Db): Promise<string[]> {
  return db.knex.transaction(async (trx) => {
    await trx.raw('select pg_advisory_xact_lock(hashtextextended(?, 0))', [
      `review-mirror:migrate:${db.schema}`,
    ]);
    await trx.raw('create schema if not exists ??', [db.schema]);
    const [, applied] = (await trx.migrate.latest(migratorConfig(db.schema))) as [number, string[]];
    return applied;
  });
}

export async function pendingMigrations(db: Db): Promise<string[]> {
  const exists = await db.knex.schema.withSchema(db.schema).hasTable('knex_migrations');
  if (!exists) return migrations.map((m) => m.name);
  const [, pending] = (await db.knex.migrate.list(migratorConfig(db.schema))) as [unknown, Migration[]];
  return pending.map((m) => m.name);
}
