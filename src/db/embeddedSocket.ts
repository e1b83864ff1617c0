import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import pg from 'pg';
import { embeddedPgdata, requireEmbeddedDatabase } from './connect.js';
import { lockDataDir } from './dataDirLock.js';

/** Where a PostgreSQL client reaches the served database: a Unix socket directory and port, as libpq takes them. */
export interface EmbeddedSocket {
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

// libpq looks for the socket file `.s.PGSQL.<port>` in the directory given as host.
const PORT = 5432;

/**
 * Serves the embedded database under `dataDir` (the directory openDb uses), search_path set to
 * `schema`, on a Unix socket in a
 * private temporary directory, for one client such as psql: nothing listens on the network, and
 * the data directory lock keeps a daemon from opening it meanwhile.
 */
export async function serveEmbedded(dataDir: string, schema: string): Promise<EmbeddedSocket> {
  const dir = resolve(dataDir);
  requireEmbeddedDatabase(dir);
  const pgdata = embeddedPgdata(dir);
  const release = await lockDataDir(dir);
  let db: PGlite | undefined;
  let socketDir: string | undefined;
  try {
    db = new PGlite(pgdata);
    await db.waitReady;
    // PGlite is one session, which the socket's client continues, and it ignores PGOPTIONS: the
    // search_path is set here instead.
    await db.exec(`set search_path to ${pg.escapeIdentifier(schema)}, public`);
    socketDir = await mkdtemp(join(tmpdir(), 'review-mirror-sql-'));
    const server = new PGLiteSocketServer({ db, path: join(socketDir, `.s.PGSQL.${PORT}`) });
    await server.start();
    const opened = { db, socketDir };
    return {
      host: socketDir,
      port: PORT,
      close: async () => {
        await server.stop();
        await opened.db.close();
        await rm(opened.socketDir, { recursive: true, force: true });
        await release();
      },
    };
  } catch (error) {
    await db?.close().catch(() => {});
    if (socketDir !== undefined) await rm(socketDir, { recursive: true, force: true });
    await release();
    throw error;
  }
}
