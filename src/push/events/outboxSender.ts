import PQueue from 'p-queue';
import { valueWithin } from '../../boundedWait.js';
import type { Db } from '../../db/connect.js';
import { isDataError } from '../../db/dataError.js';
import { GroupCommit } from '../../db/groupCommit.js';
import { writeRetrying } from '../../db/writeRetrying.js';
import { describeError } from '../../errors.js';
import type { Logger, SecretScrubber } from '../../log.js';
import type { EventOutcome, Metrics } from '../../metrics.js';
import type { PartnerApi } from '../../partner-api/client.js';
import { firstHiddenByParse } from '../jsonText.js';
import { unsendableReason } from './metadataSize.js';
import {
  type ClaimedEvent,
  type ClaimRef,
  claimDueEvents,
  type RecordedDecision,
  recordDecisions,
  releaseExpiredClaims,
  renewClaims,
  returnUnsentClaims,
} from './outboxSql.js';
import {
  attemptResultOf,
  ClaimDeadlineError,
  decideAfterAttempt,
  reducedDecision,
  refusalOf,
  type SendPolicy,
  UnsendableEventError,
} from './sendPolicy.js';

export interface OutboxSenderDeps {
  readonly db: Db;
  readonly api: Pick<PartnerApi, 'events' | 'onRateLimited'>;
  readonly log: Logger;
  readonly scrubber: SecretScrubber;
  readonly metrics?:
    | Pick<Metrics, 'events' | 'eventLatency' | 'eventOutcomesKept' | 'eventOutcomesLost'>
    | undefined;
  /** The backoffs' jitter (Math.random); a test fixes it to know when a retried row is due. */
  readonly random?: () => number;
}

export interface OutboxSenderOptions {
  /** This process, as recorded in `claimed_by`. */
  readonly worker: string;
  readonly concurrency: number;
  readonly ratePerSecond: number;
  readonly leaseMs: number;
  readonly policy: SendPolicy;
}

/**
 * The last part of a claim's lease that no request may use: a send is cut off before it (its
 * outcome then unknown), leaving time to record the outcome while the claim is still this
 * replica's. Past the lease another replica may take the event back and send it too.
 */
const RECORD_SHARE_OF_LEASE = 0.25;
/**
 * A claim that has waited this share of its lease (a backlog, a queue paused by a 429) is renewed
 * before it is sent, so that its request has most of a lease; claims waiting in the queue are
 * renewed as often while a drain lasts, so that no other replica takes them for dead.
 */
const RENEW_AFTER_SHARE_OF_LEASE = 0.25;
/** A drain lasts as long as events keep coming: its housekeeping runs at least this often. */
const HOUSEKEEPING_MAX_EVERY_MS = 5_000;

/** How long a stop's last try to write the kept answers may take before they are logged as lost. */
const CLOSE_TRY_MS = 2_000;

/** An answer the database could not take, kept until it can. */
interface KeptOutcome {
  readonly decision: RecordedDecision;
  readonly key: string;
}

/** A claimed event and until when this replica surely holds it (performance.now() time). */
interface Claim {
  readonly event: ClaimedEvent;
  heldUntil: number;
}

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
 *
 * A row is POSTed only while its claim surely lasts: the lease runs from the claim (or renewal)
 * statement, so it ends no sooner than its lease after that statement was sent, by this process's
 * clock. A claim that waited is renewed first (and not sent if it was taken back), and every send
 * is cut off a margin before its claim ends, the client's own waits (a 429's Retry-After) included.
 */
export class OutboxSender {
  readonly #queue: PQueue;
  /** Whether each outcome was written (false: the claim was no longer this worker's). */
  readonly #decisions: GroupCommit<RecordedDecision, boolean>;
  /**
   * Whether each claim was renewed and marked as starting its request (false: taken back by
   * another replica). Written before every POST: a claim that lapses unmarked was never sent.
   */
  readonly #starts: GroupCommit<ClaimRef, boolean>;
  readonly #random: () => number;
  readonly #recording = new Set<Promise<void>>();
  /**
   * Outcomes whose write gave up (the database away longer than a write's retries), by row id.
   * Their rows stay `sending` under this worker, so no one can take them back while the database
   * is away, and once it is back this worker's lapsed claims look like a dead worker's: taking
   * them back would send again, as an unknown outcome, events the platform is known to have. So
   * they are written first, before anything is taken back, claimed or sent. At most the claims
   * one drain held (a few times `concurrency`): no drain claims anything while one is kept.
   */
  readonly #kept = new Map<number, KeptOutcome>();
  #writeFailure: unknown;
  /** The current drain's stop: a shutdown does not wait out a database outage. */
  #stop: AbortSignal | undefined;

  constructor(
    private readonly deps: OutboxSenderDeps,
    private readonly options: OutboxSenderOptions,
  ) {
    this.#random = deps.random ?? Math.random;
    this.#queue = new PQueue({
      concurrency: options.concurrency,
      intervalCap: options.ratePerSecond,
      interval: 1_000,
    });
    // One outcome the database refuses (a value or a constraint: not seen, but an operator's
    // trigger or check could) fails alone: its batchmates' answers are known and written, instead
    // of lapsing with it and going out again as unknown outcomes. It is then written reduced
    // (#recordOutcome), for the same reason.
    this.#decisions = new GroupCommit(
      async (batch) => {
        const written = await this.#record(batch);
        return batch.map((d) => written.has(d.id));
      },
      { isolateWhen: isDataError },
    );
    this.#starts = new GroupCommit(async (claims) => {
      const held = await renewClaims(deps.db.knex, deps.db, options.worker, claims, options.leaseMs, {
        starting: true,
      });
      return claims.map((c) => held.has(c.id));
    });
  }

  /**
   * Writes a group of outcomes, trying again while the database is unreachable (a restart, a
   * failover), for up to a claim's lease: the platform's answer is known, and dropping it would
   * leave the event's outcome unknown, so the policy might send it to a person again. The write is
   * idempotent (only rows still `sending` under this worker's claim change). Past the budget the
   * drain ends and the outcomes are kept (#kept), not dropped: a lapsed claim is taken back only
   * by a statement that reaches the database, so an outage that outlasts the lease leaves the rows
   * this worker's. Returns the ids written.
   */
  #record(batch: readonly RecordedDecision[], budgetMs = this.options.leaseMs): Promise<Set<number>> {
    return writeRetrying(() => recordDecisions(this.deps.db.knex, this.deps.db, this.options.worker, batch), {
      budgetMs,
      stop: this.#stop,
      random: this.#random,
      onRetry: (error, tries) =>
        this.deps.log.warn(
          { err: this.deps.scrubber.scrub(describeError(error)), events: batch.length, attempt: tries },
          'event outcomes not recorded; trying again',
        ),
    });
  }

  /**
   * Claims and sends until nothing is due. `stop` ends it early: nothing new is claimed, rows
   * claimed but not started go back to pending, requests in flight finish and are recorded.
   * `housekeeping` is the caller's periodic work (gauges, pruning), run with the sender's own
   * (expired claims taken back, waiting claims renewed) every few seconds of a long drain.
   */
  async drain(stop?: AbortSignal, housekeeping?: () => Promise<void>): Promise<DrainCounts> {
    this.#stop = stop;
    const { db } = this.deps;
    const { leaseMs } = this.options;
    const counts: DrainCounts = { sent: 0, retried: 0, failed: 0, parked: 0, possibleDuplicates: 0 };
    const stopListening = this.deps.api.onRateLimited((delayMs) => {
      this.#queue.pause();
      setTimeout(() => this.#queue.start(), delayMs).unref();
    });
    const waiting = new Map<number, Claim>();
    const housekeepingEveryMs = Math.min(HOUSEKEEPING_MAX_EVERY_MS, leaseMs * RENEW_AFTER_SHARE_OF_LEASE);
    let housekeepingAt = performance.now() + housekeepingEveryMs;
    let broken: unknown;
    // Left by a drain that ended on another error first (a claim during the outage): its outcomes
    // are kept and written just below, and throwing it now would only delay them by a retry.
    this.#writeFailure = undefined;
    try {
      await this.#settleOwnOutcomes();
      await this.#takeBackLapsed(counts);
      for (;;) {
        if (broken !== undefined) throw broken;
        if (this.#writeFailure !== undefined) throw this.#takeWriteFailure();
        if (stop?.aborted) break;
        if (performance.now() >= housekeepingAt) {
          await this.#housekeep(waiting, counts, housekeeping);
          housekeepingAt = performance.now() + housekeepingEveryMs;
        }
        // Claim only what can start soon (a claim is a lease on someone else's patience), and in
        // batches of at least `concurrency`: one claim statement per row would halve throughput.
        const concurrency = this.options.concurrency;
        const busy = this.#queue.size + this.#queue.pending;
        const room = concurrency * 3 - busy;
        // Before the statement is sent: its lease surely lasts until then plus the lease.
        const claimedAt = performance.now();
        const claimed =
          room >= concurrency || busy === 0
            ? await claimDueEvents(db.knex, db, this.options.worker, room, leaseMs)
            : [];
        for (const event of claimed) {
          waiting.set(event.id, { event, heldUntil: claimedAt + leaseMs });
          this.#queue
            .add(() => this.#sendClaimed(event.id, waiting, counts))
            .catch((error: unknown) => {
              broken ??= error;
            });
        }
        if (claimed.length === 0 && this.#queue.size + this.#queue.pending === 0) break;
        await this.#nextCompletion(stop, housekeepingAt - performance.now());
      }
    } finally {
      this.#queue.clear();
      // Emptied first: a task still renewing its claim finds it gone and sends nothing.
      const unsent = [...waiting.keys()];
      waiting.clear();
      await returnUnsentClaims(db.knex, db, this.options.worker, unsent).catch((error: unknown) =>
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

  /**
   * What the start of a drain does, again: claims whose worker died are taken back (a drain under
   * a steady inflow never ends, and they would stay `sending` for ever), this drain's claims still
   * waiting for a slot are renewed, and the caller's own housekeeping runs.
   */
  async #housekeep(
    waiting: ReadonlyMap<number, Claim>,
    counts: DrainCounts,
    housekeeping?: () => Promise<void>,
  ): Promise<void> {
    const { db } = this.deps;
    const { leaseMs, worker } = this.options;
    await this.#settleOwnOutcomes();
    await this.#takeBackLapsed(counts);
    const renewedAt = performance.now();
    const stale = [...waiting.values()].filter((c) => this.#needsRenewal(c.heldUntil, renewedAt));
    if (stale.length > 0) {
      const held = await renewClaims(
        db.knex,
        db,
        worker,
        stale.map((c) => c.event),
        leaseMs,
      );
      for (const claim of stale) if (held.has(claim.event.id)) claim.heldUntil = renewedAt + leaseMs;
    }
    await housekeeping?.();
  }

  /**
   * This worker's answers, written before any lapsed claim is taken back: the writes in flight
   * (one still retrying may be for a claim that lapsed while the database was away) and the kept
   * ones. Throws, taking nothing back, while one of them cannot be written.
   */
  async #settleOwnOutcomes(budgetMs?: number): Promise<void> {
    await Promise.allSettled([...this.#recording]);
    if (this.#writeFailure !== undefined) throw this.#takeWriteFailure();
    if (this.#kept.size === 0) return;
    const kept = [...this.#kept.values()];
    let written: Set<number>;
    try {
      written = await this.#record(
        kept.map((k) => k.decision),
        budgetMs,
      );
    } catch (error) {
      if (!isDataError(error)) throw error;
      await this.#settleKeptEach(kept, budgetMs);
      return;
    }
    for (const outcome of kept) this.#settleKept(outcome, written.has(outcome.decision.id));
  }

  /**
   * The kept outcomes one at a time, after the database refused them together: one it refuses is
   * written reduced, as an answer just in would be, and loses no other. One refused even reduced
   * is lost (refused at every drain, it would stop the outbox), and the refusal ends the drain.
   */
  async #settleKeptEach(kept: readonly KeptOutcome[], budgetMs: number | undefined): Promise<void> {
    const write = async (decision: RecordedDecision) =>
      (await this.#record([decision], budgetMs)).has(decision.id);
    let refused: unknown;
    for (const outcome of kept) {
      try {
        this.#settleKept(outcome, await this.#writeOrReduce(outcome.decision, outcome.key, write));
      } catch (error) {
        if (!isDataError(error)) throw error;
        this.#unkeep(outcome.decision.id);
        refused ??= error;
      }
    }
    if (refused !== undefined) throw refused;
  }

  #settleKept({ decision, key }: KeptOutcome, written: boolean): void {
    this.#unkeep(decision.id);
    if (written) {
      this.deps.log.info(
        { idempotency_key: key, outcome: decision.state },
        'kept event outcome recorded, the database being back',
      );
    } else this.#logNotHeld(key, decision.state);
  }

  /**
   * The process stops: the kept outcomes get one more try, without waiting out an outage. Those
   * still unwritten are lost, and each event is taken back as an unknown outcome once its claim
   * lapses (sent again as a possible duplicate, or parked): every one is logged, for an operator.
   */
  async close(): Promise<void> {
    if (this.#kept.size === 0) return;
    this.#writeFailure = undefined;
    // Bounded: a database that hangs rather than refuses would hold the try past the stop's
    // deadline, and the lines naming each event would never be written.
    const tried = this.#settleOwnOutcomes(0).then(
      () => true,
      () => false,
    );
    if (!(await valueWithin(tried, CLOSE_TRY_MS, false))) this.#forgetKept('the process is stopping');
  }

  #forgetKept(why: string): void {
    for (const { decision, key } of this.#kept.values()) this.#logLost(decision, key, why);
    this.#kept.clear();
    this.deps.metrics?.eventOutcomesKept.set(0);
  }

  #logLost(decision: RecordedDecision, key: string, why: string): void {
    this.deps.log.error(
      { idempotency_key: key, outcome: decision.state, platform_event_id: decision.platformId, why },
      'event outcome lost: the platform answered but the answer was never recorded; the event will be taken back as an unknown outcome (possible duplicate, or parked)',
    );
    this.deps.metrics?.eventOutcomesLost.inc();
  }

  #keep(outcome: KeptOutcome): void {
    this.#kept.set(outcome.decision.id, outcome);
    this.deps.metrics?.eventOutcomesKept.set(this.#kept.size);
  }

  #unkeep(id: number): void {
    this.#kept.delete(id);
    this.deps.metrics?.eventOutcomesKept.set(this.#kept.size);
  }

  #logNotHeld(key: string, outcome: RecordedDecision['state']): void {
    this.deps.log.error(
      { idempotency_key: key, outcome, worker: this.options.worker },
      'event outcome not recorded: this replica no longer holds its claim; another replica may send it again (possible duplicate)',
    );
  }

  /**
   * Takes back the claims whose lease ran out, counted like the outcomes of this drain's own
   * attempts: an event failed because its claims kept lapsing must show in the failed count.
   */
  async #takeBackLapsed(counts: DrainCounts): Promise<void> {
    const { db, metrics } = this.deps;
    const released = await releaseExpiredClaims(db.knex, db, this.options.policy);
    // Under `retry` each is flagged a possible duplicate, the ones failed at their last lapse too;
    // under `park` none is.
    const flagged = released.retried + released.failed;
    counts.retried += released.retried;
    counts.possibleDuplicates += flagged;
    counts.failed += released.failed;
    counts.parked += released.parked;
    for (const outcome of ['retried', 'failed', 'parked'] as const) {
      if (released[outcome] > 0) metrics?.events.inc({ outcome }, released[outcome]);
    }
    if (flagged > 0) metrics?.events.inc({ outcome: 'possible_duplicate' }, flagged);
  }

  #needsRenewal(heldUntil: number, now: number): boolean {
    return heldUntil - now < this.options.leaseMs * (1 - RENEW_AFTER_SHARE_OF_LEASE);
  }

  /**
   * One queued claim's turn: sent if this replica still holds it (renewed, and marked as started,
   * first), left alone if the drain gave it back meanwhile or another replica took it.
   */
  async #sendClaimed(id: number, waiting: Map<number, Claim>, counts: DrainCounts): Promise<void> {
    const claim = waiting.get(id);
    if (claim === undefined) return;
    const renewedAt = performance.now();
    // A failure throws with the claim still waiting: the drain ends and gives it back. The mark
    // may have been written all the same: its lapse is then charged, which only errs on the side
    // of a possible duplicate.
    const held = await this.#starts.add(claim.event);
    if (!waiting.has(id)) return;
    if (!held) {
      waiting.delete(id);
      this.deps.log.warn(
        { idempotency_key: claim.event.key },
        'event not sent: its claim ran out while it waited and another replica took it back',
      );
      return;
    }
    waiting.delete(id);
    await this.#send(claim.event, renewedAt + this.options.leaseMs, counts);
  }

  /**
   * Writes an attempt's outcome. One whose full write the database refuses (a data error, alone in
   * its group) is written again reduced (sendPolicy.reducedDecision), since left `sending` its
   * event would be sent again although the platform's answer is known. Refused even reduced, it
   * is lost as any unrecorded outcome is (logged, its claim left to lapse), and the drain ends
   * with the refusal.
   */
  async #recordOutcome(decision: RecordedDecision, key: string): Promise<void> {
    const written = await this.#writeOrReduce(decision, key, (d) => this.#writeOrKeep(d, key));
    // The claim ran out before the outcome landed (a stalled process, a write stuck past the
    // lease), and another replica took the event back: it may send it again. (After a write
    // retried because its answer was lost, it may be this worker's own earlier write.)
    if (!written) this.#logNotHeld(key, decision.state);
  }

  /**
   * Writes `decision` with `write`, and reduced if the database refuses it in full (a data error).
   * Throws what any other failure throws, and the refusal of the reduced write.
   */
  async #writeOrReduce(
    decision: RecordedDecision,
    key: string,
    write: (decision: RecordedDecision) => Promise<boolean>,
  ): Promise<boolean> {
    try {
      return await write(decision);
    } catch (error) {
      if (!isDataError(error)) throw error;
      return this.#recordReduced(decision, key, error, write);
    }
  }

  /**
   * Writes `decision` reduced with `write`, after the database `refused` it in full. Refused even
   * so, it is logged and counted as lost, and the refusal thrown.
   */
  async #recordReduced(
    decision: RecordedDecision,
    key: string,
    refused: unknown,
    write: (reduced: RecordedDecision) => Promise<boolean>,
  ): Promise<boolean> {
    const { log, scrubber } = this.deps;
    const describe = (e: unknown) => scrubber.scrub(describeError(e));
    const refusal = refusalOf(refused, describe);
    let written: boolean;
    try {
      written = await write(reducedDecision(decision, refusal));
    } catch (error) {
      if (isDataError(error)) {
        this.#logLost(
          decision,
          key,
          `the database refused it, even reduced to its outcome: ${refusalOf(error, describe)}`,
        );
      }
      throw error;
    }
    if (!written) return false;
    // The row says why its answer is missing; this line keeps the answer itself, for an operator.
    log.error(
      {
        idempotency_key: key,
        outcome: decision.state,
        platform_event_id: decision.platformId,
        platform_status: decision.platformStatus,
        error: decision.error,
        refusal,
      },
      "event outcome recorded without the platform's full answer: the database refused it (an operator's check or trigger?); only its state is recorded, so it goes on as the answer decided instead of being taken back as an unknown outcome",
    );
    return true;
  }

  /**
   * One outcome through the group commit. One the database could not be reached for is kept
   * (#kept) before this settles, so no drain can take its claim back in between.
   */
  async #writeOrKeep(decision: RecordedDecision, key: string): Promise<boolean> {
    try {
      return await this.#decisions.add(decision);
    } catch (error) {
      if (!isDataError(error)) {
        this.#keep({ decision, key });
        this.deps.log.error(
          { idempotency_key: key, outcome: decision.state, worker: this.options.worker },
          'event outcome not recorded (the database is unreachable): kept, and written before this replica takes any claim back or claims another; if the process stops first, the event will be taken back as an unknown outcome (possible duplicate, or parked)',
        );
      }
      throw error;
    }
  }

  /** A failed outcome write ends this drain only: the next one starts clean (its rows' leases lapse). */
  #takeWriteFailure(): unknown {
    const failure = this.#writeFailure;
    this.#writeFailure = undefined;
    return failure;
  }

  /** Resolves when a send finishes, `stop` fires or `timeoutMs` passes, leaving nothing behind. */
  #nextCompletion(stop: AbortSignal | undefined, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      // Already stopped (during the claim just made): no 'abort' is coming to end the wait.
      if (stop?.aborted) {
        resolve();
        return;
      }
      const done = () => {
        clearTimeout(timer);
        this.#queue.off('next', done);
        stop?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, timeoutMs));
      this.#queue.once('next', done);
      stop?.addEventListener('abort', done, { once: true });
    });
  }

  /** Sends one event whose claim this replica holds until `heldUntil`, and queues its outcome. */
  async #send(event: ClaimedEvent, heldUntil: number, counts: DrainCounts): Promise<void> {
    const { api, log, scrubber, metrics } = this.deps;
    let decision: RecordedDecision;
    // Not tied to the stop signal: a request cut off mid-flight would have an unknown outcome. Cut
    // off before the claim ends only, where the alternative is two replicas sending it.
    const deadline = new AbortController();
    const sendableMs = heldUntil - this.options.leaseMs * RECORD_SHARE_OF_LEASE - performance.now();
    const timer = setTimeout(() => deadline.abort(new ClaimDeadlineError('POST /events')), sendableMs);
    try {
      // A row written with SQL skipped the checks files and the CLI make. Its text first: once
      // parsed, a jsonb 1e400 is Infinity (sent as null) and 0.1000000000000000000001 is 0.1.
      const unsendable =
        (event.metadataText === null ? undefined : firstHiddenByParse(event.metadataText, 'metadata')) ??
        unsendableReason(event.metadata);
      if (unsendable !== undefined) throw new UnsendableEventError(`not sent: ${unsendable}`);
      // No time left (the claim's renewal took most of a lease): the timer would cut the request
      // off as soon as it was made, an unknown outcome. Not made, it is known not to have been sent.
      if (sendableMs <= 0) throw new ClaimDeadlineError('POST /events', false);
      const answer = await api.events.send(
        {
          email: event.email ?? undefined,
          contact_id: event.contactId ?? undefined,
          event_type: event.eventType,
          professional_id: event.professionalId ?? undefined,
          metadata: event.metadata ?? undefined,
        },
        deadline.signal,
      );
      decision = { ...blank(event), state: 'sent', platformId: answer.id, platformStatus: answer.status };
    } catch (error) {
      const result = attemptResultOf(error, (e) => scrubber.scrub(describeError(e)));
      const next = decideAfterAttempt(
        result,
        event.attempts,
        this.options.policy,
        this.#random,
        event.possibleDuplicate,
      );
      // Every field of a decision but `sent`'s is named as the outcome's row has it.
      decision =
        next.state === 'sent'
          ? { ...blank(event), state: 'sent', platformId: next.id, platformStatus: next.status }
          : { ...blank(event), ...next };
      log.warn(
        {
          idempotency_key: event.key,
          attempts: event.attempts,
          err: 'error' in result ? result.error : undefined,
          next: next.state,
        },
        'event not sent',
      );
    } finally {
      clearTimeout(timer);
    }
    // The slot is free once the platform answered; the outcome is written by the next group
    // commit. A worker killed before it lands leaves the row `sending`: its lease runs out and the
    // event is taken back as an unknown outcome, counted under the policy, never lost.
    const recorded = this.#recordOutcome(decision, event.key);
    this.#recording.add(recorded);
    void recorded.then(
      () => this.#recording.delete(recorded),
      (error: unknown) => {
        this.#recording.delete(recorded);
        this.#writeFailure ??= error;
      },
    );
    const outcome: EventOutcome = decision.state === 'pending' ? 'retried' : decision.state;
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

const blank = ({ id, claim }: ClaimRef): RecordedDecision => ({
  id,
  claim,
  state: 'pending',
  delayMs: 0,
  error: null,
  possibleDuplicate: false,
  refund: false,
  platformId: null,
  platformStatus: null,
});
