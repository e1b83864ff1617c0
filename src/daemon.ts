import { makeAdminServer } from './admin/server.js';
import type { Context } from './context.js';
import { dbOptionsFromConfig, openDb } from './db/connect.js';
import { migrate } from './db/migrate.js';
import { makeMetrics } from './metrics.js';
import { Scheduler } from './scheduler.js';

/** Resolves on the first SIGTERM or SIGINT (or when `stop` aborts, for in-process callers). */
function shutdownRequested(stop?: AbortSignal): Promise<string> {
  return new Promise((resolve) => {
    const done = (reason: string) => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
      resolve(reason);
    };
    const onTerm = () => done('SIGTERM');
    const onInt = () => done('SIGINT');
    process.once('SIGTERM', onTerm);
    process.once('SIGINT', onInt);
    stop?.addEventListener('abort', () => done('stop requested'), { once: true });
  });
}

/**
 * `review-mirror run`: the long-running process. Applies migrations, serves health and metrics,
 * schedules the jobs, and on a signal goes through its one shutdown path: stop scheduling,
 * let in-flight work finish within the grace period, close servers and the database.
 */
export async function runDaemon(ctx: Context, stop?: AbortSignal): Promise<void> {
  const { config, log } = ctx;
  const db = await openDb(dbOptionsFromConfig(config, log));
  try {
    const applied = await migrate(db);
    log.info({ applied, backend: db.backend, schema: db.schema }, 'database ready');
    const metrics = makeMetrics();
    const scheduler = new Scheduler(log, metrics);
    const admin = makeAdminServer({ db, metrics });
    await admin.listen({ host: config.admin.host, port: config.admin.port });
    log.info({ port: config.admin.port }, 'admin server listening');

    const reason = await shutdownRequested(stop);
    log.info({ reason, graceMs: config.shutdownGraceMs }, 'shutting down');
    await scheduler.stop(config.shutdownGraceMs);
    await admin.close();
  } finally {
    await db.close();
  }
  log.info('stopped');
}
