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
      readonly ping: () => Promise<string | undefined>;
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
   * Start-up is over: `/readyz` checks that the database answers (see makeDatabasePing) and each
   * of `readinessChecks` (each returns a reason when not ready) at every request.
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
 * Whether the database answers this replica: `select 1` within the probe's bound, or, when that
 * failed or waited too long, any other query of the process answered meanwhile. The ping goes
 * through the shared pool, and waits for a free connection behind the jobs' work (a reconcile, a
 * backfill's COPY, the embedded database's one connection): a replica whose connections are all
 * busy still commits deliveries, later, and taken for unreachable it was sent none. A database
 * that is down, or hangs, answers nothing at all.
 */
function makeDatabasePing(db: Db): () => Promise<string | undefined> {
  let lastAnswerAt = Number.NEGATIVE_INFINITY;
  db.knex.on('query-response', () => {
    lastAnswerAt = performance.now();
  });
  return async () => {
    const sentAt = performance.now();
    const answered = await valueWithin(
      db.knex.raw('select 1').then(
        () => true,
        () => false,
      ),
      CHECK_TIMEOUT_MS,
      false,
    );
    return answered || lastAnswerAt >= sentAt ? undefined : 'database unreachable';
  };
}

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
    const { ping, readinessChecks } = current;
    const results = await Promise.all([
      ping(),
      ...readinessChecks.map((check) =>
        valueWithin(check(), CHECK_TIMEOUT_MS, 'readiness check timed out').catch((e: unknown) => String(e)),
      ),
    ]);
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
      phase = { kind: 'running', ping: makeDatabasePing(db), readinessChecks };
    },
    stopping: () => {
      phase = { kind: 'stopping' };
    },
    close,
  };
}
