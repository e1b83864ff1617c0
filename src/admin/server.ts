import Fastify, { type FastifyInstance } from 'fastify';
import type { Db } from '../db/connect.js';
import type { Metrics } from '../metrics.js';

export interface AdminServerOptions {
  db: Db;
  metrics: Metrics;
  /** Extra readiness checks contributed by other parts (each returns a reason when not ready). */
  readinessChecks?: ReadonlyArray<() => Promise<string | undefined>>;
}

/**
 * Health and metrics, on a port that is never exposed to the internet: `/healthz` says the
 * process is up, `/readyz` that it can do its work (database reachable), `/metrics` is Prometheus.
 */
export function makeAdminServer({ db, metrics, readinessChecks = [] }: AdminServerOptions): FastifyInstance {
  const app = Fastify({ logger: false });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const problems: string[] = [];
    try {
      await db.knex.raw('select 1');
    } catch {
      problems.push('database unreachable');
    }
    for (const check of readinessChecks) {
      const problem = await check().catch((e: unknown) => String(e));
      if (problem !== undefined) problems.push(problem);
    }
    if (problems.length > 0) return reply.code(503).send({ status: 'not ready', problems });
    return { status: 'ready' };
  });
  app.get('/metrics', async (_request, reply) => {
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  return app;
}
