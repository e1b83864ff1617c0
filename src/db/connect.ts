import { resolve } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
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
  /** Schema-qualified table name for knex (`review_mirror.reviews`): we never rely on search_path. */
  table(name: string): string;
  /**
   * Runs `fn` while holding a cluster-wide lock named `key`. On PostgreSQL the lock is a session
   * advisory lock on a connection of its own, never one a pooler could hand to someone else; the
   * embedded database belongs to one process already, so there it just runs `fn`.
   */
  withLock<T>(key: string, fn: () => Promise<T>): Promise<T>;
  /** Like `withLock`, but gives up at once when another session holds the lock (a replica skips). */
  tryWithLock<T>(key: string, fn: () => Promise<T>): Promise<LockAttempt<T>>;
  close(): Promise<void>;
}

export type LockAttempt<T> = { acquired: true; value: T } | { acquired: false };

export interface DbOptions {
  url: string | undefined;
  schema: string;
  poolMax: number;
  /** Directory of the embedded database; `undefined` with no url means in-memory (tests). */
  dataDir: string | undefined;
  /** Longest a statement may run on the server; 0 disables it. */
  statementTimeoutMs?: number;
  log?: Logger;
}

/** Bounds on every connection to a PostgreSQL server, so no wait on the database is endless. */
const CONNECT_TIMEOUT_MS = 10_000;
const ACQUIRE_TIMEOUT_MS = 15_000;
// A dead peer (a failover, a cut network) is noticed by TCP keepalive instead of never.
const KEEPALIVE_DELAY_MS = 10_000;

export function dbOptionsFromConfig(config: Config, log?: Logger): DbOptions {
  return {
    url: config.db.url,
    schema: config.db.schema,
    poolMax: config.db.poolMax,
    dataDir: config.dataDir,
    statementTimeoutMs: config.db.statementTimeoutMs,
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

export async function openDb(options: DbOptions): Promise<Db> {
  if (options.url !== undefined) {
    const url = options.url;
    const log = options.log;
    const bounds = {
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
      ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
    };
    const knex = knexFactory({
      client: 'pg',
      connection: { connectionString: url, application_name: 'review-mirror', ...bounds },
      pool: { min: 0, max: options.poolMax },
      acquireConnectionTimeout: ACQUIRE_TIMEOUT_MS,
      log: knexLog(log),
    });
    /**
     * Runs `fn` on a session of its own holding the advisory lock `key` (`wait`: queue for it;
     * otherwise give up at once). Ending the session releases the lock even when no unlock could
     * be sent, and a pooler can never hand this session's lock to anyone else.
     */
    const lockedSession = async <T>(
      key: string,
      wait: boolean,
      fn: () => Promise<T>,
    ): Promise<LockAttempt<T>> => {
      const session = new pg.Client({
        connectionString: url,
        application_name: 'review-mirror-lock',
        ...bounds,
      });
      // The server ending this session (a restart, a failover, pg_terminate_backend, a pooler
      // recycling it) is an 'error' event: unhandled, it would end the whole process. The lock is
      // gone with the session; the job's own queries fail or finish on the pool.
      session.on('error', (error) => log?.warn({ key, err: error }, 'lock session lost'));
      await session.connect();
      try {
        if (wait) await session.query('select pg_advisory_lock(hashtextextended($1, 0))', [key]);
        else {
          const res = await session.query('select pg_try_advisory_lock(hashtextextended($1, 0)) as ok', [
            key,
          ]);
          if (res.rows[0]?.ok !== true) return { acquired: false };
        }
        return { acquired: true, value: await fn() };
      } finally {
        await session.end().catch(() => {});
      }
    };
    const withLock = async <T>(key: string, fn: () => Promise<T>): Promise<T> => {
      const attempt = await lockedSession(key, true, fn);
      if (!attempt.acquired) throw new Error(`advisory lock ${key} was not granted`);
      return attempt.value;
    };
    const tryWithLock = <T>(key: string, fn: () => Promise<T>) => lockedSession(key, false, fn);
    return makeDb(knex, options.schema, 'postgres', withLock, async () => knex.destroy(), tryWithLock);
  }

  let releaseLock: (() => Promise<void>) | undefined;
  let connection: Record<string, string> = {};
  if (options.dataDir !== undefined) {
    const dir = resolve(options.dataDir);
    releaseLock = await lockDataDir(dir, {
      onCompromised: (e) => options.log?.error({ err: e }, 'embedded database lock lost'),
    });
    connection = { filename: resolve(dir, 'pgdata') };
  }
  const knex = knexFactory({
    client: ClientPgLite,
    dialect: 'postgres',
    connection,
    log: knexLog(options.log),
  });
  try {
    await knex.raw('select 1');
  } catch (error) {
    await releaseLock?.();
    throw error;
  }
  return makeDb(
    knex,
    options.schema,
    'embedded',
    (_key, fn) => fn(),
    async () => {
      await knex.destroy();
      await releaseLock?.();
    },
    async (_key, fn) => ({ acquired: true, value: await fn() }),
  );
}

function makeDb(
  knex: Knex,
  schema: string,
  backend: Backend,
  withLock: Db['withLock'],
  close: () => Promise<void>,
  tryWithLock: Db['tryWithLock'],
): Db {
  let closed: Promise<void> | undefined;
  return {
    knex,
    schema,
    backend,
    table: (name) => `${schema}.${name}`,
    withLock,
    tryWithLock,
    close: () => {
      closed ??= close();
      return closed;
    },
  };
}
