import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../../config/schema.js';
import { describeError } from '../../errors.js';
import { REPLICA_ID } from '../../jobs/replicaIdentity.js';
import type { Metrics } from '../../metrics.js';
import { DEFAULT_BACKOFF } from '../../partner-api/retryPolicy.js';
import { OutboxListener } from './outboxListener.js';
import { OutboxSender, type OutboxSenderDeps } from './outboxSender.js';
import { pruneOutbox, readOutboxBacklog } from './outboxSql.js';

const PRUNE_EVERY_MS = 60 * 60 * 1000;
/** A failed prune is tried again after this, doubling while it keeps failing, up to PRUNE_EVERY_MS. */
const PRUNE_RETRY_MS = 60 * 1000;

export type OutboxServiceDeps = OutboxSenderDeps & {
  readonly metrics?:
    | (NonNullable<OutboxSenderDeps['metrics']> &
        Pick<Metrics, 'outboxBacklog' | 'outboxOldestPending' | 'outboxListening' | 'pruneFailures'>)
    | undefined;
};

/**
 * The outbox worker of `run`: drains what is due, then sleeps until a NOTIFY (on PostgreSQL), the
 * poll interval, or a retry falling due; refreshes the backlog metrics and prunes old rows. Every
 * replica runs one. A failing database or platform is logged and retried with backoff: it never
 * ends the process. The housekeeping is not the drain's: its failures are logged and counted on
 * their own, and never put the worker into its failure backoff (new events would wait it out).
 */
export class OutboxService {
  readonly #stop = new AbortController();
  readonly #sender: OutboxSender;
  #listener: OutboxListener | undefined;
  #wake: (() => void) | undefined;
  #pending = false;
  #loop: Promise<void> | undefined;
  /** When the next prune is due (Date.now() time): at once at start, then hourly. */
  #pruneDueAt = 0;
  /** The prune running, in the background: a drain never waits for it. */
  #pruning: Promise<void> | undefined;
  /** Failures in a row of the prune, and of the gauges' refresh: apart from the drain's. */
  #pruneFailures = 0;
  #gaugeFailures = 0;

  constructor(
    private readonly deps: OutboxServiceDeps,
    private readonly config: Config['events'],
    readonly worker = REPLICA_ID,
  ) {
    this.#sender = new OutboxSender(deps, {
      worker,
      concurrency: config.concurrency,
      ratePerSecond: config.ratePerSecond,
      leaseMs: config.leaseMs,
      policy: { unknownOutcome: config.unknownOutcome, maxAttempts: config.maxAttempts, ...DEFAULT_BACKOFF },
    });
  }

  start(): void {
    const { db, log, scrubber } = this.deps;
    if (db.backend === 'postgres' && this.config.listenUrl !== undefined) {
      this.#listener = new OutboxListener(
        this.config.listenUrl,
        db.schema,
        () => this.wake(),
        log,
        scrubber,
        this.deps.metrics,
      );
    }
    this.#loop = this.#run();
  }

  /** Something was enqueued (a NOTIFY, or this process itself): drain now. */
  wake(): void {
    this.#pending = true;
    this.#wake?.();
  }

  async #run(): Promise<void> {
    const { log, scrubber } = this.deps;
    const stop = this.#stop.signal;
    for (let failures = 0; !stop.aborted; ) {
      this.#pending = false;
      try {
        // Housekeeping also runs inside the drain: under a steady inflow a drain does not end.
        const counts = await this.#sender.drain(stop, () => this.#housekeep());
        if (counts.sent + counts.failed + counts.parked + counts.retried > 0)
          log.info({ ...counts }, 'outbox drained');
        await this.#housekeep();
        failures = 0;
      } catch (error) {
        failures++;
        // Only the drain's own failures (the database, an outcome write) get here: a wake does not
        // cut this wait short, or every enqueue would retry a drain that keeps failing at once.
        log.warn({ err: scrubber.scrub(describeError(error)), failures }, 'outbox worker failed; retrying');
        await sleep(Math.min(30_000, 500 * 2 ** Math.min(failures, 6)), undefined, { signal: stop }).catch(
          () => {},
        );
        continue;
      }
      // A stop that came during the drain or the housekeeping fires no 'abort' for the wait below
      // to hear: checked first, or shutdown would wait out the poll (EVENTS_POLL_SECONDS).
      if (this.#pending || stop.aborted) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.config.pollMs);
        function done() {
          clearTimeout(timer);
          stop.removeEventListener('abort', done);
          resolve();
        }
        this.#wake = done;
        stop.addEventListener('abort', done, { once: true });
      });
      this.#wake = undefined;
    }
  }

  /**
   * Starts the prune when it is due, and refreshes the backlog gauges. Never throws: a failure of
   * either is logged and counted here, and the drain goes on (a drain failing in the database
   * fails on its own statements).
   */
  async #housekeep(): Promise<void> {
    const { db, log, metrics, scrubber } = this.deps;
    if (this.#pruning === undefined && Date.now() >= this.#pruneDueAt && !this.#stop.signal.aborted) {
      this.#pruning = this.#prune().finally(() => {
        this.#pruning = undefined;
      });
    }
    try {
      const stats = await readOutboxBacklog(db.knex, db);
      metrics?.outboxBacklog.set(stats.backlog);
      metrics?.outboxOldestPending.set(stats.oldestPendingSeconds);
      this.#gaugeFailures = 0;
    } catch (error) {
      this.#gaugeFailures++;
      log.warn(
        { err: scrubber.scrub(describeError(error)), failures: this.#gaugeFailures },
        'could not refresh the outbox gauges',
      );
    }
  }

  /**
   * Deletes the sent rows and keys past their retention, in batches (pruneOutbox), alongside the
   * drains: a large prune delays no event. A failure (a statement timeout, the database away) is
   * tried again after PRUNE_RETRY_MS, doubling while it keeps failing, up to the hourly prune.
   */
  async #prune(): Promise<void> {
    const { db, log, metrics, scrubber } = this.deps;
    try {
      const pruned = await pruneOutbox(db.knex, db, this.config.retentionDays, this.config.keyRetentionDays, {
        signal: this.#stop.signal,
      });
      this.#pruneFailures = 0;
      this.#pruneDueAt = Date.now() + PRUNE_EVERY_MS;
      if (pruned.pruned + pruned.keysForgotten > 0) log.info(pruned, 'outbox pruned');
    } catch (error) {
      this.#pruneFailures++;
      // Its keys (event_keys) are pruned by the same statements: one table's count for both.
      metrics?.pruneFailures.inc({ table: 'events_outbox' });
      const retryMs = Math.min(PRUNE_EVERY_MS, PRUNE_RETRY_MS * 2 ** Math.min(this.#pruneFailures - 1, 6));
      this.#pruneDueAt = Date.now() + retryMs;
      log.warn(
        {
          err: scrubber.scrub(describeError(error)),
          failures: this.#pruneFailures,
          retryInSeconds: retryMs / 1000,
        },
        'could not prune the events outbox; the events are sent meanwhile',
      );
    }
  }

  /** Stops claiming, lets requests in flight finish and record (bounded by the caller's grace). */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    // A prune in flight stops after its current batch.
    await this.#pruning;
    // After a drain ended by a database outage, answers may still be kept unwritten.
    await this.#sender.close();
    await this.#listener?.close();
  }
}
