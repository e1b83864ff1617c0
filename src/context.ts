import { loadConfig } from './config/load.js';
import { type Config, configSecrets } from './config/schema.js';
import {
  type Db,
  type DbOptions,
  dbOptionsFromConfig,
  openDb,
  requireEmbeddedDatabase,
} from './db/connect.js';
import type { RunnerDeps } from './jobs/runner.js';
import { type Logger, makeLogger, SecretScrubber } from './log.js';

/** What every command starts from: the parsed configuration, a logger that cannot leak secrets. */
export interface Context {
  readonly config: Config;
  readonly log: Logger;
  readonly scrubber: SecretScrubber;
}

/**
 * `logTo`: the daemon logs to stdout (where a container's logs are collected); a one-shot command
 * logs to stderr, so that its stdout carries only its result and can be piped.
 */
export function makeContext(
  env: NodeJS.ProcessEnv = process.env,
  logTo: NodeJS.WritableStream = process.stdout,
): Context {
  const config = loadConfig(env);
  const scrubber = new SecretScrubber(configSecrets(config));
  const log = makeLogger({ level: config.logLevel, scrubber, destination: logTo });
  return { config, log, scrubber };
}

/** The body of a one-shot command, given its context (a configuration error ends it with exit 2). */
export function commandAction<A extends unknown[]>(body: (ctx: Context, ...args: A) => Promise<void>) {
  return async (...args: A) => body(makeContext(process.env, process.stderr), ...args);
}

/** Opens the configured database, runs `fn`, and closes it whatever happens. */
export async function withDb<T>(
  ctx: Context,
  fn: (db: Db) => Promise<T>,
  options?: Partial<DbOptions>,
): Promise<T> {
  const db = await openDb({ ...dbOptionsFromConfig(ctx.config, ctx.log), ...options });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/**
 * As withDb, for a command that works on what earlier runs stored (status, state get, events list,
 * retry and discard, webhooks replay): an embedded database not in DATA_DIR (a mistyped one) is
 * said so, where opening it would create a new, empty one and report on that.
 */
export async function withMirror<T>(ctx: Context, fn: (db: Db) => Promise<T>): Promise<T> {
  if (ctx.config.db.url === undefined) requireEmbeddedDatabase(ctx.config.dataDir);
  return withDb(ctx, fn);
}

/** How a command runs its jobs: with its logger, under leases of the configured length, runs kept as configured. */
export function runnerDeps(ctx: Context, db: Db, metrics?: RunnerDeps['metrics']): RunnerDeps {
  return {
    db,
    log: ctx.log,
    metrics,
    scrubber: ctx.scrubber,
    lease: { seconds: ctx.config.jobs.leaseSeconds },
    runRetentionDays: ctx.config.jobs.runRetentionDays,
  };
}
