import type { Db } from '../db/connect.js';
import { isDataError } from '../db/dataError.js';
import { GroupCommit } from '../db/groupCommit.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { compareText } from '../mirror/reviewRow.js';
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

/**
 * While commits are failing, how often a readiness check tries a commit of its own (see
 * readinessProblem): often enough that a replica is ready again within a few seconds of its
 * database, seldom enough to cost nothing.
 */
const PROBE_EVERY_MS = 2_000;

/**
 * A commit still running after this long lets the deliveries behind it commit beside it: several
 * times a commit's usual time under load (0.5–2 ms in docs/benchmarks.md), well under the 20 ms
 * that a delivery's p99 may take.
 */
const OVERLAP_AFTER_MS = 10;

/**
 * Most characters of delivery bodies one statement carries. A batch is one statement, its bodies
 * one array literal (twice their length once escaped, and the review's comment again beside
 * them): a burst of deliveries near a large WEBHOOK_MAX_BODY_BYTES made a text longer than a
 * JavaScript string can be (about 512 MiB), or than PostgreSQL takes in one message (1 GB), and
 * the whole batch was refused 503 for the size of the others. Past this, the batch is written in
 * several statements of one transaction, still one commit; a usual batch stays one statement.
 */
const STATEMENT_BODY_CHARS = 16 * 1024 * 1024;

/**
 * The indexes of `batch` by statement: groups of at most `budget` body characters (one delivery
 * at least), in the order of their review ids. Taken in that order across the statements of one
 * transaction, as within one statement (storeDeliveries), the row locks of two commits in flight
 * at once cannot deadlock.
 */
export function statementGroups(batch: readonly Delivery[], budget: number): number[][] {
  const total = batch.reduce((sum, d) => sum + d.body.length, 0);
  if (total <= budget) return [batch.map((_, i) => i)];
  const order = batch
    .map((d, i) => ({ id: d.event.data.id, i }))
    .sort((a, b) => compareText(a.id, b.id) || a.i - b.i);
  const groups: number[][] = [];
  let group: number[] = [];
  let chars = 0;
  for (const { i } of order) {
    const length = batch[i]!.body.length;
    if (group.length > 0 && chars + length > budget) {
      groups.push(group);
      group = [];
      chars = 0;
    }
    group.push(i);
    chars += length;
  }
  groups.push(group);
  return groups;
}

export interface InboxOptions {
  readonly db: Db;
  readonly log: Logger;
  readonly metrics?: Metrics;
  /** Most deliveries in one commit; the rest wait for the next one. */
  readonly maxBatch?: number;
  /**
   * Longest a delivery waits, from its submit, for its commit; past it, it is answered 503 and the
   * commit is left to finish or fail on its own, so one stalled connection cannot hold every later
   * one (GroupCommit's timeout).
   */
  readonly commitTimeoutMs?: number;
  /** Most body characters one statement of a commit carries (STATEMENT_BODY_CHARS by default). */
  readonly statementBodyChars?: number;
}

/**
 * The webhook deliveries' group commit. A delivery that finds no commit in flight is committed at
 * once (after the current turn of the event loop, so deliveries parsed together go together);
 * deliveries arriving while a commit is in flight go into the next one. `submit` settles only
 * after COMMIT: the 200 is never sent for data that is not durable. A delivery the database
 * refuses fails alone; a commit slower than `commitTimeoutMs` is answered 503 (the platform
 * retries). A commit that stalls (a checkpoint's fsync) does not hold the deliveries behind it:
 * after OVERLAP_AFTER_MS they commit beside it, on another connection. Commits failing for a
 * minute make the replica not ready.
 */
export class Inbox {
  readonly #db: Db;
  readonly #log: Logger;
  readonly #metrics: Metrics | undefined;
  readonly #statementBodyChars: number;
  readonly #commits: GroupCommit<Delivery, DeliveryOutcome>;
  #closed = false;
  #lastSuccessMs = 0;
  #lastFailureMs = 0;
  /** Whether the last failure was a refused commit (a probe can clear it), not a stalled one. */
  #lastFailureRefused = false;
  #probing = false;
  #lastProbeMs = 0;

  constructor(options: InboxOptions) {
    this.#db = options.db;
    this.#log = options.log;
    this.#metrics = options.metrics;
    this.#statementBodyChars = options.statementBodyChars ?? STATEMENT_BODY_CHARS;
    const commitTimeoutMs = options.commitTimeoutMs ?? 5_000;
    this.#commits = new GroupCommit((batch) => this.#commit(batch), {
      maxBatch: options.maxBatch ?? 500,
      overlapAfterMs: OVERLAP_AFTER_MS,
      isolateWhen: isDataError,
      onFailure: (error, batchSize) => {
        this.#lastFailureMs = Date.now();
        this.#lastFailureRefused = true;
        this.#log.error({ err: error, batchSize }, 'webhook inbox commit failed');
      },
      timeout: {
        ms: commitTimeoutMs,
        onTimeout: (batchSize) => {
          this.#lastFailureMs = Date.now();
          this.#lastFailureRefused = false;
          this.#metrics?.webhookRefusals.inc({ reason: 'commit_timeout' }, batchSize);
          this.#log.error({ batchSize, timeoutMs: commitTimeoutMs }, 'webhook inbox commit timed out');
          // A delivery that did commit meanwhile is answered `duplicate` when the platform retries it.
          return new InboxTimeoutError(`commit took longer than ${commitTimeoutMs} ms`);
        },
      },
    });
  }

  /**
   * Why this replica should not take deliveries now (its commits are failing), or undefined. A
   * replica taken for not ready is sent no delivery, so no commit of one could clear the state
   * before the minute is out, however soon the database is back (a pooler restarted, a failover):
   * after a refused commit, each check also starts a commit of its own (one at a time, every
   * PROBE_EVERY_MS), whose success clears it for the next check. Not after a stalled one: a commit
   * still running (a lock, a slow disk) clears it itself when it ends, and an unrelated probe's
   * success would send deliveries back to the stall.
   */
  readinessProblem(nowMs = Date.now()): string | undefined {
    const failing = this.#lastFailureMs > this.#lastSuccessMs && nowMs - this.#lastFailureMs < FAILING_FOR_MS;
    if (!failing) return undefined;
    if (this.#lastFailureRefused) this.#probe(nowMs);
    return 'webhook inbox commits are failing';
  }

  /** A commit that writes its own transaction record (txid_current), as a delivery's commit does. */
  #probe(nowMs: number): void {
    if (this.#probing || this.#closed || nowMs - this.#lastProbeMs < PROBE_EVERY_MS) return;
    this.#probing = true;
    this.#lastProbeMs = nowMs;
    this.#db.knex
      .raw('select txid_current()')
      .then(
        () => {
          this.#lastSuccessMs = Date.now();
        },
        (error: unknown) => this.#log.debug({ err: error }, 'webhook inbox probe commit failed'),
      )
      .finally(() => {
        this.#probing = false;
      });
  }

  /** Resolves once the delivery is committed; rejects when the commit failed (answer 5xx). */
  submit(delivery: Delivery): Promise<DeliveryOutcome> {
    if (this.#closed) return Promise.reject(new InboxClosedError('inbox closed'));
    return this.#commits.add(delivery);
  }

  /** Refuses new deliveries and waits until every accepted one has been committed or failed. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#commits.idle();
  }

  async #commit(batch: readonly Delivery[]): Promise<DeliveryOutcome[]> {
    const endTimer = this.#metrics?.webhookCommitSeconds.startTimer();
    const groups = statementGroups(batch, this.#statementBodyChars);
    const outcomes =
      groups.length === 1
        ? await storeDeliveries(this.#db.knex, this.#db, batch)
        : await this.#db.knex.transaction(async (trx) => {
            const all = new Array<DeliveryOutcome>(batch.length);
            for (const group of groups) {
              const stored = await storeDeliveries(
                trx,
                this.#db,
                group.map((i) => batch[i]!),
              );
              group.forEach((i, n) => {
                all[i] = stored[n]!;
              });
            }
            return all;
          });
    endTimer?.();
    this.#lastSuccessMs = Date.now();
    this.#metrics?.webhookBatchSize.observe(batch.length);
    for (const outcome of outcomes) this.#metrics?.webhookDeliveries.inc({ outcome });
    return outcomes;
  }
}
