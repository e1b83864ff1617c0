import Fastify, { type FastifyInstance } from 'fastify';
import { valueWithin } from '../boundedWait.js';
import type { Db } from '../db/connect.js';
import type { Metrics } from '../metrics.js';
import { boundedClose } from '../serverClose.js';

export interface AdminServerOptions {
  metrics: Metrics;
}

/** What the daemon is doing: `/healthz` and `/readyz` answer according to it. */
type AdminPhase =
  | { readonly kind: 'starting'; readonly doing: string }
  | {
      readonly kind: 'running';
      readonly db: Db;
      readonly readinessChecks: ReadonlyArray<() => Promise<string | undefined>>;
    }
  | { readonly kind: 'stopping' };

/**
 * The admin server of `run`. It listens before anything else starts, so that a liveness probe
 * finds the process alive while start-up waits (for a database that is down, for another
 * replica's migration) instead of killing it: the crash loop the wait is meant to end.
 */
export interface AdminServer {
  readonly app: FastifyInstance;
  /** Start-up is doing (or waiting for) `doing`: `/healthz` says so, `/readyz` answers 503. */
  starting(doing: string): void;
  /**
   * Start-up is over: `/readyz` checks the database and each of `readinessChecks` (each returns
   * a reason when not ready) at every request.
   */
  running(db: Db, readinessChecks: ReadonlyArray<() => Promise<string | undefined>>): void;
  /** Shutdown began: `/readyz` answers 503 so that no load balancer sends more. */
  stopping(): void;
  /** Closes the server within a bound, whatever its clients do (see boundedClose). */
  close(): Promise<void>;
}

/** A probe must answer even when the database hangs: a check that takes too long is a failed one. */
const CHECK_TIMEOUT_MS = 2_000;

/**
 * Health and metrics, on a port that is never exposed to the internet: `/healthz` says the
 * process is up (also while it starts), `/readyz` that this replica can take webhooks (started,
 * database reachable, inbox commits succeeding), `/metrics` is Prometheus.
 */
export function makeAdminServer({ metrics }: AdminServerOptions): AdminServer {
  let phase: AdminPhase = { kind: 'starting', doing: 'starting' };
  const app = Fastify({ logger: false });
  const close = boundedClose(app);
  app.get('/healthz', async () => {
    const current = phase;
    if (current.kind === 'starting') return { status: 'starting', doing: current.doing };
    return { status: current.kind === 'running' ? 'ok' : 'stopping' };
  });
  app.get('/readyz', async (_request, reply) => {
    const current = phase;
    if (current.kind === 'starting') {
      return reply.code(503).send({ status: 'starting', problems: [`starting: ${current.doing}`] });
    }
    if (current.kind === 'stopping') {
      return reply.code(503).send({ status: 'stopping', problems: ['shutting down'] });
    }
    const { db, readinessChecks } = current;
    const ping = async () => {
      await db.knex.raw('select 1');
      return undefined;
    };
    const results = await Promise.all(
      [ping, ...readinessChecks].map((check, i) =>
        valueWithin(
          check(),
          CHECK_TIMEOUT_MS,
          i === 0 ? 'database unreachable' : 'readiness check timed out',
        ).catch((e: unknown) => (i === 0 ? 'database unreachable' : String(e))),
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
  return {
    app,
    starting: (doing) => {
      phase = { kind: 'starting', doing };
    },
    running: (db, readinessChecks) => {
      phase = { kind: 'running', db, readinessChecks };
    },
    stopping: () => {
      phase = { kind: 'stopping' };
    },
    close,
  };
}
