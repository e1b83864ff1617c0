import { randomBytes } from 'node:crypto';
import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { embeddedImage } from './embeddedTemplate.js';

/** The real PostgreSQL server when CI sets it; otherwise tests run on an in-memory embedded database. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;

/** For the tests about a PostgreSQL server itself (its pooler, its replicas): always the local one. */
export const POSTGRES_URL = TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export function uniqueSchema(prefix = 't'): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

/**
 * A migrated database of its own for one test file: a fresh schema on the real server, or a
 * fresh in-memory PGlite; on the server of `url` when given (a test of the server's own ways).
 * `close` drops the schema again.
 */
export async function freshDb(options: { migrate?: boolean; url?: string } = {}): Promise<Db> {
  const schema = uniqueSchema();
  const url = options.url ?? TEST_DATABASE_URL;
  const db = await openDb({
    url,
    schema,
    poolMax: 5,
    dataDir: undefined,
    embeddedImage: url === undefined ? await embeddedImage() : undefined,
  });
  if (options.migrate !== false) await migrate(db);
  const close = db.close;
  return {
    ...db,
    close: async () => {
      if (db.backend === 'postgres') await db.knex.raw('drop schema if exists ?? cascade', [schema]);
      await close();
    },
  };
}

/** Drops a schema that child processes created on the real server (an embedded one goes with its directory). */
export async function dropSchema(schema: string, url = TEST_DATABASE_URL): Promise<void> {
  if (url === undefined) return;
  const db = await openDb({ url, schema, poolMax: 1, dataDir: undefined });
  try {
    await db.knex.raw('drop schema if exists ?? cascade', [schema]);
  } finally {
    await db.close();
  }
}
