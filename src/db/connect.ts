import { existsSync } from 'node:fs';
import type { Socket } from 'node:net';
import { resolve } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import { lockDataDir } from './dataDirLock.js';

// Timestamps stay JS Dates (pg's default); numeric and bigint come back as exact strings on both backends.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => v);

export type Backend = 'postgres' | 'embedded';

/** An open database: the knex instance and the schema every table of ours lives in. */
export interface Db {
  readonly knex: Knex;
  readonly schema: string;
  readonly backend: Backend;
  /**
   * Whether a statement may be prepared under a name and kept by the connection: only on a
   * PostgreSQL server reached directly. A transaction pooler hands each transaction whichever
   * server connection is free, where the name means nothing (PgBouncer 1.18 does not track them).
   */
  readonly namedStatements: boolean;
  /** Schema-qualified table name for knex (`review_mirror.reviews`): we never rely on search_path. */
  table(name: string): string;
  close(): Promise<void>;
}

export interface DbOptions {
  url: string | undefined;
  schema: string;
  poolMax: number;
  /** Directory of the embedded database; `undefined` with no url means in-memory (tests). */
  dataDir: string | undefined;
  /**
   * In memory only: the database starts as this dump of a data directory (PGlite's
   * `dumpDataDir`) instead of a new one, which takes initdb's seconds (tests open hundreds).
   */
  embeddedImage?: Blob;
  /**
   * Longest a statement may run on the server; 0 disables it. The client waits for an answer at
   * most this long plus a margin, whatever the server does.
   */
  statementTimeoutMs?: number;
  /**
   * `transaction`: `url` is a transaction pooler. PgBouncer refuses `statement_timeout` as a
   * startup parameter, so the timeout is then the role's (`ALTER ROLE … SET statement_timeout`).
   */
  pooler?: 'none' | 'transaction';
  log?: Logger;
}

/** Bounds on every connection to a PostgreSQL server, so no wait on the database is endless. */
const CONNECT_TIMEOUT_MS = 10_000;
const ACQUIRE_TIMEOUT_MS = 15_000;
// A dead peer (a failover, a cut network) is noticed by TCP keepalive instead of never.
export const KEEPALIVE_DELAY_MS = 10_000;
// A peer that keeps the connection up but never answers (a hung pooler, a stopped backend) is
// noticed by neither keepalive nor statement_timeout: the client stops waiting a little after the
// server would have given up, so the server's clearer error wins whenever it can still arrive.
const QUERY_TIMEOUT_MARGIN_MS = 10_000;
/** pg's error for a query that outlived `query_timeout`. */
const QUERY_READ_TIMEOUT = 'Query read timeout';

export function dbOptionsFromConfig(config: Config, log?: Logger): DbOptions {
  return {
    url: config.db.url,
    schema: config.db.schema,
    poolMax: config.db.poolMax,
    dataDir: config.dataDir,
    statementTimeoutMs: config.db.statementTimeoutMs,
    pooler: config.db.pooler,
    log,
  };
}

/**
 * knex writes its own warnings (a connection error during an outage, with a stack) to the
 * console, between our JSON lines. They go through the logger instead, at debug: whoever awaited
 * the failed query reports it once.
 */
function knexLog(log: Logger | undefined): Knex.Config['log'] {
  const write = (message: unknown) => log?.debug({ knex: String(message).split('\n')[0] }, 'knex');
  return { warn: write, error: write, deprecate: write, debug: write };
}

/**
 * knex puts the statement before the database's message (`with input as (\n… - date/time field
 * value out of range: …`), so an error's first line, all that its one-line description shows, was
 * SQL. The database's own words are kept on the error as `databaseMessage` (see describeError).
 * With `compileSqlOnError` off, that prefix is the statement exactly as sent, never with its
 * parameters' values written in.
 */
function keepDatabaseMessages(knex: Knex): Knex {
  knex.on('query-error', (error: unknown, query: { sql?: unknown } | undefined) => {
    if (!(error instanceof Error) || typeof query?.sql !== 'string') return;
    const prefix = `${query.sql} - `;
    if (!error.message.startsWith(prefix)) return;
    Object.defineProperty(error, 'databaseMessage', { value: error.message.slice(prefix.length) });
  });
  return knex;
}

/**
 * pg gives up on a query past `query_timeout` but keeps its connection, still waiting for the
 * answer: handed out again, it would fail every query after it the same way. Its socket is
 * destroyed instead, and the pool (see `validate`) never hands it out again.
 */
function discardTimedOutConnections(knex: Knex, sockets: ReadonlyMap<string, Socket>): Knex {
  knex.on('query-error', (error: unknown, query: { __knexUid?: unknown } | undefined) => {
    // knex puts the statement before pg's message (see keepDatabaseMessages).
    if (!(error instanceof Error) || !error.message.endsWith(QUERY_READ_TIMEOUT)) return;
    sockets.get(String(query?.__knexUid))?.destroy();
  });
  return knex;
}

/** What knex's pool hands `afterCreate`: pg's client, with the socket pg keeps to itself. */
type PooledClient = pg.Client & {
  readonly __knexUid: string;
  readonly connection: { readonly stream: Socket };
};

/** Where the embedded database of `dataDir` keeps its files. */
export const embeddedPgdata = (dataDir: string): string => resolve(dataDir, 'pgdata');

/**
 * For a command that only reads the embedded database (status, sql): one that is not there (a
 * mistyped DATA_DIR) is said so, instead of a new, empty one created and read.
 */
export function requireEmbeddedDatabase(dataDir: string): void {
  if (!existsSync(embeddedPgdata(dataDir))) {
    throw new Error(`no embedded database in ${resolve(dataDir)}: run review-mirror migrate or sync first`);
  }
}

export async function openDb(options: DbOptions): Promise<Db> {
  if (options.url !== undefined) {
    const bounds = {
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
      ...(options.statementTimeoutMs && options.pooler !== 'transaction'
        ? { statement_timeout: options.statementTimeoutMs }
        : {}),
      // Also behind a pooler, where statement_timeout is the role's: the wait is ours either way.
      ...(options.statementTimeoutMs
        ? { query_timeout: options.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS }
        : {}),
    };
    const sockets = new Map<string, Socket>();
    const knex = discardTimedOutConnections(
      keepDatabaseMessages(
        knexFactory({
          client: 'pg',
          connection: { connectionString: options.url, application_name: 'review-mirror', ...bounds },
          pool: {
            min: 0,
            max: options.poolMax,
            afterCreate: (client: PooledClient, done: (error: null) => void) => {
              sockets.set(client.__knexUid, client.connection.stream);
              client.once('end', () => sockets.delete(client.__knexUid));
              done(null);
            },
            // At once, not when the socket's close event comes: the next acquire may come first.
            validate: (client: PooledClient) => !client.connection.stream.destroyed,
          },
          acquireConnectionTimeout: ACQUIRE_TIMEOUT_MS,
          compileSqlOnError: false,
          log: knexLog(options.log),
        }),
      ),
      sockets,
    );
    return makeDb(knex, options.schema, 'postgres', options.pooler !== 'transaction', async () =>
      knex.destroy(),
    );
  }

  let releaseLock: (() => Promise<void>) | undefined;
  let connection: Record<string, unknown> = {};
  if (options.dataDir !== undefined) {
    const dir = resolve(options.dataDir);
    releaseLock = await lockDataDir(dir, {
      onCompromised: (e) => options.log?.error({ err: e }, 'embedded database lock lost'),
    });
    connection = { filename: embeddedPgdata(dir) };
  } else if (options.embeddedImage !== undefined) {
    // knex-pglite takes an instance of ours as `pglite`.
    const { PGlite } = await import('@electric-sql/pglite');
    connection = { pglite: new PGlite({ loadDataDir: options.embeddedImage }) };
  }
  // Loaded only here: a process on a PostgreSQL server never parses the embedded database's code.
  const { default: ClientPgLite } = await import('knex-pglite');
  const knex = keepDatabaseMessages(
    knexFactory({
      client: ClientPgLite,
      dialect: 'postgres',
      connection,
      compileSqlOnError: false,
      log: knexLog(options.log),
    }),
  );
  try {
    await knex.raw('select 1');
  } catch (error) {
    await releaseLock?.();
    throw error;
  }
  return makeDb(knex, options.schema, 'embedded', false, async () => {
    await knex.destroy();
    await releaseLock?.();
  });
}

function makeDb(
  knex: Knex,
  schema: string,
  backend: Backend,
  namedStatements: boolean,
  close: () => Promise<void>,
): Db {
  let closed: Promise<void> | undefined;
  return {
    knex,
    schema,
    backend,
    namedStatements,
    table: (name) => `${schema}.${name}`,
    close: () => {
      closed ??= close();
      return closed;
    },
  };
}
