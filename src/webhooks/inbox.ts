import type { Db } from '../db/connect.js';
import { isDataError } from '../db/dataError.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { type Delivery, type DeliveryOutcome, storeDeliveries } from './inboxSql.js';

export class InboxClosedError extends Error {
  override readonly name = 'InboxClosedError';
}

/** The commit did not finish in time (a stalled database): answered 503, so the platform retries. */
export class InboxTimeoutError extends Error {
  override readonly name = 'InboxTimeoutError';
}

/** How long after its last failure a commit path with no success since counts as failing. */
const FAILING_FOR_MS = 60_000;

export interface InboxOptions {
  readonly db: Db;
  readonly log: Logger;
  readonly metrics?: Metrics;
  /** Most deliveries in one commit; the rest wait for the next one. */
  readonly maxBatch?: number;
  /**
   * Longest a batch waits for its commit; past it, its deliveries are answered 503 and the commit
   * is left to finish or fail on its own, so one stalled connection cannot hold every later one.
   */
  readonly commitTimeoutMs?: number;
}

interface Waiter {
  readonly delivery: Delivery;
  readonly resolve: (outcome: DeliveryOutcome) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Group commit for webhook deliveries. A delivery that finds no commit in flight is committed at
 * once (after the current turn of the event loop, so deliveries parsed together go together);
 * deliveries arriving while a commit is in flight wait and go into the next one. Under a burst
 * the batch grows instead of the queue of transactions, and each delivery waits at most about two
 * commits. `submit` settles only after COMMIT: the 200 is never sent for data that is not durable.
 */
export class Inbox {
  readonly #db: Db;
  readonly #log: Logger;
  readonly #metrics: Metrics | undefined;
  readonly #maxBatch: number;
  readonly #commitTimeoutMs: number;
  #pending: Waiter[] = [];
  #flushing: Promise<void> | undefined;
  #closed = false;
  #lastSuccessMs = 0;
  #lastFailureMs = 0;

  constructor(options: InboxOptions) {
    this.#db = options.db;
    this.#log = options.log;
    this.#metrics = options.metrics;
    this.#maxBatch = options.maxBatch ?? 500;
    this.#commitTimeoutMs = options.commitTimeoutMs ?? 5_000;
  }

  /** Why this replica should not take deliveries now (its commits are failing), or undefined. */
  readinessProblem(nowMs = Date.now()): string | undefined {
    const failing = this.#lastFailureMs > this.#lastSuccessMs && nowMs - this.#lastFailureMs < FAILING_FOR_MS;
    return failing ? 'webhook inbox commits are failing' : undefined;
  }

  /** Resolves once the delivery is committed; rejects when the commit failed (answer 5xx). */
  submit(delivery: Delivery): Promise<DeliveryOutcome> {
    if (this.#closed) return Promise.reject(new InboxClosedError('inbox closed'));
    return new Promise((resolve, reject) => {
      this.#pending.push({ delivery, resolve, reject });
      this.#kick();
    });
  }

  /** Deliveries waiting for a commit, including the one in flight's successors. */
  get backlog(): number {
    return this.#pending.length;
  }

  /** Refuses new deliveries and waits until every accepted one has been committed or failed. */
  async close(): Promise<void> {
    this.#closed = true;
    while (this.#flushing) await this.#flushing;
  }

  #kick(): void {
    if (this.#flushing) return;
    this.#flushing = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.#flushAll())
      .finally(() => {
        this.#flushing = undefined;
        // A delivery may have arrived between the last batch and this point.
        if (this.#pending.length > 0) this.#kick();
      });
  }

  async #flushAll(): Promise<void> {
    while (this.#pending.length > 0) {
      const batch = this.#pending.splice(0, this.#maxBatch);
      const committed = this.#commit(batch).then(() => true);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), this.#commitTimeoutMs);
      });
      const inTime = await Promise.race([committed, late]);
      clearTimeout(timer);
      if (!inTime) {
        // Settling a promise twice is a no-op: if the commit ends later, its outcome is ignored
        // (a delivery that did commit is answered `duplicate` when the platform retries it).
        this.#lastFailureMs = Date.now();
        this.#metrics?.webhookRefusals.inc({ reason: 'commit_timeout' }, batch.length);
        this.#log.error(
          { batchSize: batch.length, timeoutMs: this.#commitTimeoutMs },
          'webhook inbox commit timed out',
        );
        const error = new InboxTimeoutError(`commit took longer than ${this.#commitTimeoutMs} ms`);
        for (const w of batch) w.reject(error);
      }
    }
  }

  async #commit(batch: Waiter[]): Promise<void> {
    const endTimer = this.#metrics?.webhookCommitSeconds.startTimer();
    try {
      const outcomes = await storeDeliveries(
        this.#db.knex,
        this.#db,
        batch.map((w) => w.delivery),
      );
      endTimer?.();
      this.#lastSuccessMs = Date.now();
      this.#metrics?.webhookBatchSize.observe(batch.length);
      batch.forEach((w, i) => {
        const outcome = outcomes[i]!;
        this.#metrics?.webhookDeliveries.inc({ outcome });
        w.resolve(outcome);
      });
    } catch (error) {
      if (batch.length > 1 && isDataError(error)) {
        // One delivery the database refuses must not fail the others with it: bisect to isolate it.
        const half = Math.ceil(batch.length / 2);
        await this.#commit(batch.slice(0, half));
        await this.#commit(batch.slice(half));
        return;
      }
      this.#lastFailureMs = Date.now();
      this.#log.error({ err: error, batchSize: batch.length }, 'webhook inbox commit failed');
      for (const w of batch) w.reject(error);
    }
  }
}
