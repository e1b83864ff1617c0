import { setTimeout as sleep } from 'node:timers/promises';
import PQueue from 'p-queue';
import type { Db } from '../../db/connect.js';
import { isDataError } from '../../db/dataError.js';
import { GroupCommit } from '../../db/groupCommit.js';
import { describeError } from '../../errors.js';
import type { Logger, SecretScrubber } from '../../log.js';
import type { Metrics } from '../../metrics.js';
import type { PartnerApi } from '../../partner-api/client.js';
import { nextRetryDelayMs } from '../../partner-api/retryPolicy.js';
import {
  type ClaimedEvent,
  claimDueEvents,
  type RecordedDecision,
  recordDecisions,
  releaseExpiredClaims,
  returnUnsentClaims,
} from './outboxSql.js';
import { attemptResultOf, decideAfterAttempt, type SendPolicy } from './sendPolicy.js';

export interface OutboxSenderDeps {
  readonly db: Db;
  readonly api: Pick<PartnerApi, 'events' | 'onRateLimited'>;
  readonly log: Logger;
  readonly scrubber: SecretScrubber;
  readonly metrics?: Pick<Metrics, 'events' | 'eventLatency'> | undefined;
}

export interface OutboxSenderOptions {
  /** This process, as recorded in `claimed_by`. */
  readonly worker: string;
  readonly concurrency: number;
  readonly ratePerSecond: number;
  readonly leaseMs: number;
  readonly policy: SendPolicy;
}

/** Waits between tries of an outcome write (the client's backoff, shorter: a restart is seconds). */
const RECORD_BACKOFF = { baseDelayMs: 100, maxDelayMs: 2_000 } as const;

export interface DrainCounts {
  sent: number;
  retried: number;
  failed: number;
  parked: number;
  possibleDuplicates: number;
}

/**
 * Sends what is due in the outbox. Every replica runs one: rows are claimed a few at a time with
 * SKIP LOCKED (no two workers hold one row), each claim leased so a dead worker's rows are taken
 * back, outcomes group-committed as answers arrive (all of them before `drain` returns), and at
 * most `concurrency` requests in flight under one rate limit, paused as a whole by a 429.
 */
export class OutboxSender {
  readonly #queue: PQueue;
  readonly #decisions: GroupCommit<RecordedDecision>;
  readonly #random = Math.random;
  readonly #recording = new Set<Promise<void>>();
  #writeFailure: unknown;
  /** The current drain's stop: a shutdown does not wait out a database outage. */
  #stop: AbortSignal | undefined;

  constructor(
    private readonly deps: OutboxSenderDeps,
    private readonly options: OutboxSenderOptions,
  ) {
    this.#queue = new PQueue({
      concurrency: options.concurrency,
      intervalCap: options.ratePerSecond,
      interval: 1_000,
    });
    this.#decisions = new GroupCommit((batch) => this.#record(batch));
  }

  /**
   * Writes a group of outcomes, trying again while the database is unreachable (a restart, a
   * failover), for up to a claim's lease: the platform's answer is known, and dropping it would
   * leave the event's outcome unknown, so the policy might send it to a person again. The write is
   * idempotent (only rows still `sending` under this worker's claim change), and past the lease
   * the rows have been taken back and it would change nothing.
   */
  async #record(batch: readonly RecordedDecision[]): Promise<void> {
    const startedAt = Date.now();
    const retry = { ...RECORD_BACKOFF, maxRetries: Number.POSITIVE_INFINITY, budgetMs: this.options.leaseMs };
    for (let attempt = 0; ; attempt++) {
      try {
        await recordDecisions(this.deps.db.knex, this.deps.db, this.options.worker, batch);
        return;
      } catch (error) {
        const delayMs = nextRetryDelayMs(
          { retriesSoFar: attempt, elapsedMs: Date.now() - startedAt, retryAfterMs: undefined },
          retry,
          this.#random,
        );
        if (isDataError(error) || this.#stop?.aborted || delayMs === undefined) throw error;
        this.deps.log.warn(
          { err: this.deps.scrubber.scrub(describeError(error)), events: batch.length, attempt: attempt + 1 },
          'event outcomes not recorded; trying again',
        );
        await sleep(delayMs);
      }
    }
  }

  /**
   * Claims and sends until nothing is due. `stop` ends it early: nothing new is claimed, rows
   * claimed but not started go back to pending, requests in flight finish and are recorded.
   */
  async drain(stop?: AbortSignal): Promise<DrainCounts> {
    this.#stop = stop;
    const { db } = this.deps;
    const counts: DrainCounts = { sent: 0, retried: 0, failed: 0, parked: 0, possibleDuplicates: 0 };
    const stopListening = this.deps.api.onRateLimited((delayMs) => {
      this.#queue.pause();
      setTimeout(() => this.#queue.start(), delayMs).unref();
    });
    const waiting = new Map<number, ClaimedEvent>();
    let broken: unknown;
    try {
      await releaseExpiredClaims(db.knex, db, this.options.policy.unknownOutcome);
      for (;;) {
        if (broken !== undefined) throw broken;
        if (this.#writeFailure !== undefined) throw this.#takeWriteFailure();
        if (stop?.aborted) break;
        // Claim only what can start soon (a claim is a lease on someone else's patience), and in
        // batches of at least `concurrency`: one claim statement per row would halve throughput.
        const concurrency = this.options.concurrency;
        const busy = this.#queue.size + this.#queue.pending;
        const room = concurrency * 3 - busy;
        const claimed =
          room >= concurrency || busy === 0
            ? await claimDueEvents(db.knex, db, this.options.worker, room, this.options.leaseMs)
            : [];
        for (const event of claimed) {
          waiting.set(event.id, event);
          this.#queue
            .add(async () => {
              waiting.delete(event.id);
              await this.#send(event, counts);
            })
            .catch((error: unknown) => {
              broken ??= error;
            });
        }
        if (claimed.length === 0 && this.#queue.size + this.#queue.pending === 0) break;
        await this.#nextCompletion(stop);
      }
    } finally {
      this.#queue.clear();
      await returnUnsentClaims(db.knex, db, this.options.worker, [...waiting.keys()]).catch(
        (error: unknown) =>
          this.deps.log.warn(
            { err: this.deps.scrubber.scrub(describeError(error)) },
            'could not return unsent claims',
          ),
      );
      await this.#queue.onIdle();
      await Promise.allSettled([...this.#recording]);
      stopListening();
    }
    if (broken !== undefined) throw broken;
    if (this.#writeFailure !== undefined) throw this.#takeWriteFailure();
    return counts;
  }

  /** A failed outcome write ends this drain only: the next one starts clean (its rows' leases lapse). */
  #takeWriteFailure(): unknown {
    const failure = this.#writeFailure;
    this.#writeFailure = undefined;
    return failure;
  }

  /** Resolves when a send finishes or `stop` fires, leaving no listener behind. */
  #nextCompletion(stop: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.#queue.off('next', done);
        stop?.removeEventListener('abort', done);
        resolve();
      };
      this.#queue.once('next', done);
      stop?.addEventListener('abort', done, { once: true });
    });
  }

  async #send(event: ClaimedEvent, counts: DrainCounts): Promise<void> {
    const { api, log, scrubber, metrics } = this.deps;
    let decision: RecordedDecision;
    try {
      // Not tied to the stop signal: a request cut off mid-flight would have an unknown outcome.
      const answer = await api.events.send({
        email: event.email ?? undefined,
        contact_id: event.contactId ?? undefined,
        event_type: event.eventType,
        professional_id: event.professionalId ?? undefined,
        metadata: event.metadata ?? undefined,
      });
      decision = { ...blank(event.id), state: 'sent', platformId: answer.id, platformStatus: answer.status };
    } catch (error) {
      const result = attemptResultOf(error, (e) => scrubber.scrub(describeError(e)));
      const next = decideAfterAttempt(result, event.attempts, this.options.policy, this.#random);
      decision =
        next.state === 'pending'
          ? {
              ...blank(event.id),
              state: 'pending',
              delayMs: next.delayMs,
              error: next.error,
              possibleDuplicate: next.possibleDuplicate,
              refund: next.refund,
            }
          : next.state === 'sent'
            ? { ...blank(event.id), state: 'sent', platformId: next.id, platformStatus: next.status }
            : { ...blank(event.id), state: next.state, error: next.error };
      log.warn(
        {
          key: event.key,
          attempts: event.attempts,
          err: 'error' in result ? result.error : undefined,
          next: next.state,
        },
        'event not sent',
      );
    }
    // The slot is free once the platform answered; the outcome is written by the next group
    // commit. A worker killed before it lands leaves the row `sending`: its lease runs out and the
    // event is taken back as an unknown outcome, counted under the policy, never lost.
    const recorded = this.#decisions.add(decision);
    this.#recording.add(recorded);
    void recorded.then(
      () => this.#recording.delete(recorded),
      (error: unknown) => {
        this.#recording.delete(recorded);
        this.#writeFailure ??= error;
      },
    );
    const outcome = decision.state === 'pending' ? 'retried' : decision.state;
    metrics?.events.inc({ outcome });
    if (decision.possibleDuplicate) {
      counts.possibleDuplicates++;
      metrics?.events.inc({ outcome: 'possible_duplicate' });
    }
    if (decision.state === 'sent') {
      counts.sent++;
      metrics?.eventLatency.observe((Date.now() - event.enqueuedAt.getTime()) / 1000);
    } else if (decision.state === 'pending') counts.retried++;
    else counts[decision.state]++;
  }
}

const blank = (id: number): RecordedDecision => ({
  id,
  state: 'pending',
  delayMs: 0,
  error: null,
  possibleDuplicate: false,
  refund: false,
  platformId: null,
  platformStatus: null,
});
