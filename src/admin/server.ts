import Fastify, { type FastifyInstance } from 'fastify';
import type { Db } from '../db/connect.js';
import type { Metrics } from '../metrics.js';

export interface AdminServerOptions {
  db: Db;
  metrics: Metrics;
  /**
   * Extra readiness checks contributed by other parts (each returns a reason when not ready),
   * read at every request: parts started after the server add theirs to the same array.
   */
  readinessChecks?: ReadonlyArray<() => Promise<string | undefined>>;
}

/** A probe must answer even when the database hangs: a check that takes too long is a failed one. */
const CHECK_TIMEOUT_MS = 2_000;

async function withinBound(
  check: Promise<string | undefined>,
  onTimeout: string,
): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(onTimeout), CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([check, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Health and metrics, on a port that is never exposed to the internet: `/healthz` says the
 * process is up, `/readyz` that this replica can take webhooks (database reachable, inbox commits succeeding), `/metrics` is Prometheus.
 */
export function makeAdminServer({ db, metrics, readinessChecks = [] }: AdminServerOptions): FastifyInstance {
  const app = Fastify({ logger: false });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const ping = async () => {
      await db.knex.raw('select 1');
      return undefined;
    };
    const results = await Promise.all(
      [ping, ...readinessChecks].map((check, i) =>
        withinBound(check(), i === 0 ? 'database unreachable' : 'readiness check timed out').catch(
          (e: unknown) => (i === 0 ? 'database unreachable' : String(e)),
        ),
      ),
    );
    const problems = results.filter((p): p is string => p !== undefined);
    if (problems.length > 0) return reply.code(503).send({ status: 'not ready', problems });
    return { status: 'ready' };
  });
  app.get('/metrics', async (_request, reply) => {
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  return app;
}
