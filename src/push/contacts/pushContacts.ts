import { randomUUID } from 'node:crypto';
import PQueue from 'p-queue';
import type { ContactMapping, EventRule } from '../../config/configFile.js';
import type { Db } from '../../db/connect.js';
import { GroupCommit } from '../../db/groupCommit.js';
import { writeRetrying } from '../../db/writeRetrying.js';
import { describeError, RetryableError } from '../../errors.js';
import { answerFreshFor } from '../../freshAnswer.js';
import type { Fence } from '../../jobs/lease.js';
import { addCount, type RunCounts } from '../../jobs/runCounts.js';
import type { JobRunInfo } from '../../jobs/runner.js';
import type { Logger, SecretScrubber } from '../../log.js';
import type { ContactRowOutcome, Metrics } from '../../metrics.js';
import type { PartnerApi } from '../../partner-api/client.js';
import type { UpsertOptions } from '../../partner-api/contacts.js';
import { enqueueEvents } from '../events/outboxSql.js';
import { type FileIdentity, openExport } from '../exportFile.js';
import { formatOf, type ReadOptions } from '../readRecords.js';
import { RejectReport } from '../rejectReport.js';
import type { ContactRow } from './contactRow.js';
import {
  analyzeStagedContacts,
  type ContactOutcome,
  clearStagedContacts,
  databaseNow,
  platformTookContactsSince,
  prunePushLog,
  readStagedContacts,
  recordOutcomes,
  recordPending,
  type StagedPosition,
} from './contactsSql.js';
import { type PushOperation, planPush } from './planPush.js';
import { PushLogWriter } from './pushLog.js';
import { type ClearableFields, stageContacts } from './stageContacts.js';
import {
  contactAttemptResultOf,
  GIVE_UP_AFTER_MS,
  GIVE_UP_AFTER_PUSHES,
  givenUpError,
  heldShortOfLimit,
  NO_STREAK,
  type RetryAfterStop,
  retryAfterStopOf,
  stillGivenUpError,
  streakAfterFailure,
  type UnavailableStreak,
} from './unavailableStreak.js';

export interface PushContactsDeps {
  readonly db: Db;
  /** `reviews`: the probe that the platform is up before a contact is given up. */
  readonly api: Pick<PartnerApi, 'contacts' | 'reviews' | 'onRateLimited'>;
  readonly log: Logger;
  readonly scrubber: SecretScrubber;
  readonly metrics?:
    | Pick<
        Metrics,
        | 'contactsRows'
        | 'contactsPushDuration'
        | 'contactsRowsPerSecond'
        | 'contactsLastSuccess'
        | 'pruneFailures'
      >
    | undefined;
}

export interface PushContactsOptions extends ReadOptions {
  readonly mapping: ContactMapping;
  /** Events the export's rows fire (config file `events.rules`). */
  readonly rules?: readonly EventRule[] | undefined;
  /** Re-send every valid contact, changed or not. */
  readonly full: boolean;
  /** Read, validate and diff; send nothing and record nothing but the report. */
  readonly dryRun: boolean;
  /** Requests in flight at once. */
  readonly concurrency: number;
  /** Requests started per second, across every worker. */
  readonly ratePerSecond: number;
  readonly logRetentionDays: number;
  /** The file the inbox took under this name: only that one is read (see openExport). */
  readonly sameAs?: FileIdentity | undefined;
}

export interface PushSummary {
  read: number;
  valid: number;
  rejected: number;
  replaced: number;
  unchanged: number;
  /** Would be sent (dry run) or were sent. */
  toSend: number;
  sent: number;
  /** Of those sent: new on the platform, and updated there. */
  created: number;
  updated: number;
  failed: number;
  /**
   * Of those failed, the contacts the platform did not refuse: it was unavailable or its answer
   * was lost. Not the file's fault; the next push sends them again.
   */
  unavailable: number;
  /**
   * Of those failed, and not counted as unavailable: contacts the platform failed on
   * GIVE_UP_AFTER_PUSHES pushes in a row while it answered otherwise, given up in this push. Not
   * sent again until an export changes them, or a full push.
   */
  givenUp: number;
  /**
   * Contacts given up on an earlier push that the file holds unchanged: not sent, and named in the
   * report. Not counted as failed: nothing was tried, so nothing failed in this push (their
   * failure was counted, and alerted on, when they were given up); or every daily export holding
   * one would fail again, land in failed/ and keep ReviewMirrorContactsFailing firing.
   */
  stillGivenUp: number;
  /** Events the rules fired that were new to the outbox. */
  events: number;
  reportPath: string;
}

/**
 * Where a push is, for a progress bar: bytes of the file read (and rows so far), then valid
 * contacts handled (compared, sent or failed).
 */
export interface PushProgress {
  update(phase: 'reading' | 'sending', done: number, total: number, rows: number): void;
  /**
   * The file is read and staged: whatever fails after (sending, recording, housekeeping) is the
   * database's, the platform's or the program's, never the file's own.
   */
  staged?(): void;
}

const PLAN_BATCH = 1_000;
/**
 * Contacts failed in a row, each after its own retries, by a platform that did not refuse them
 * (nor gave them up: those are the contacts' own): it is down, and the push stops instead of
 * trying every remaining row of the file.
 */
const STOP_AFTER_UNAVAILABLE_IN_A_ROW = 10;
/**
 * How long the outcomes of contacts the platform answered are tried again while the database is
 * unreachable: a restart or a failover, not an outage. Past it the push stops, and what stayed
 * unrecorded is pending, sent again by the next push.
 */
const RECORD_OUTCOMES_BUDGET_MS = 30_000;

/**
 * Pushes the contacts of a CRM export. The file is streamed into staging rows (rejects to the
 * report and the row log, the last row of each key kept), then read back in file order joined
 * with what was pushed before: only new, changed or previously failed contacts are sent, each
 * recorded as pending before its request and with its outcome after — so a process killed
 * mid-file sends at most the requests in flight again on the next push, which the platform's
 * upsert makes harmless — with bounded concurrency and one rate limit for every worker. Memory
 * holds a batch of rows and the requests queued, whatever the file's size.
 */
export async function pushContacts(
  deps: PushContactsDeps,
  file: string,
  options: PushContactsOptions,
  counts: RunCounts,
  run: JobRunInfo,
  signal?: AbortSignal,
  progress?: PushProgress,
): Promise<PushSummary> {
  const { db } = deps;
  const startedAt = performance.now();
  const pushId = randomUUID();
  // A missing file fails here, before a report is created beside it.
  const { bytes, size } = await openExport(file, options.sameAs);
  const report = new RejectReport(file);
  const pushLog = new PushLogWriter(db, { runId: run.runId, file }, !options.dryRun);
  const summary: PushSummary = {
    read: 0,
    valid: 0,
    rejected: 0,
    replaced: 0,
    unchanged: 0,
    toSend: 0,
    sent: 0,
    created: 0,
    updated: 0,
    failed: 0,
    unavailable: 0,
    givenUp: 0,
    stillGivenUp: 0,
    events: 0,
    reportPath: report.path,
  };
  let clearable: ClearableFields = { name: false, professional_id: false };
  try {
    const tick = () => progress?.update('reading', bytes.bytesRead, size, summary.read);
    const reading = progress ? setInterval(tick, 200) : undefined;
    try {
      clearable = await stageContacts(
        db,
        pushId,
        bytes,
        { ...options, format: options.format ?? formatOf(file) },
        {
          report,
          pushLog,
          enqueue: options.dryRun ? undefined : (events) => enqueueEvents(db.knex, db, events),
        },
        summary,
        signal,
      );
      progress?.update('reading', size, size, summary.read);
    } finally {
      clearInterval(reading);
    }
    progress?.staged?.();
    await analyzeStagedContacts(db.knex, db);
    // The report stays open while sending: the contacts given up earlier are named in it.
    await sendStaged(
      deps,
      pushId,
      options,
      summary,
      { report, pushLog, clearable },
      run.fence,
      signal,
      progress,
    );
    await report.close();
  } finally {
    // Read to its end unless the push failed before: its descriptor is closed either way.
    bytes.destroy();
    // Closed above unless the push failed: then that failure is the one thrown, not the report's.
    await report.close().catch(() => undefined);
    // Rows a failed clear leaves are pruned by a later push; the push's own outcome stands.
    await clearStagedContacts(db.knex, db, pushId, { pruneAbandoned: !options.dryRun }).catch(
      (error: unknown) =>
        deps.log.warn({ err: deps.scrubber.scrub(describeError(error)) }, 'could not clear staged contacts'),
    );
  }
  // Housekeeping: a failure leaves old rows for the next push to prune; this push's outcome,
  // recorded row by row, stands.
  if (!options.dryRun) {
    await prunePushLog(db.knex, db, options.logRetentionDays).catch((error: unknown) => {
      deps.metrics?.pruneFailures.inc({ table: 'contact_push_log' });
      deps.log.error(
        { err: deps.scrubber.scrub(describeError(error)) },
        'could not prune the contacts push log',
      );
    });
  }
  for (const [name, n] of Object.entries({ read: summary.read, ...rowOutcomes(summary) })) {
    addCount(counts, name, n);
  }
  if (!options.dryRun) recordMetrics(deps, summary, (performance.now() - startedAt) / 1000);
  return summary;
}

/** Plans each staged contact in file order and sends those that need it. */
async function sendStaged(
  deps: PushContactsDeps,
  pushId: string,
  options: PushContactsOptions,
  summary: PushSummary,
  {
    report,
    pushLog,
    clearable,
  }: { report: RejectReport; pushLog: PushLogWriter; clearable: ClearableFields },
  fence: Fence,
  signal: AbortSignal | undefined,
  progress: PushProgress | undefined,
): Promise<void> {
  const { db, log } = deps;
  const queue = new PQueue({
    concurrency: options.concurrency,
    intervalCap: options.ratePerSecond,
    interval: 1_000,
  });
  // A 429 pauses every worker for its Retry-After, not only the request that met it.
  const stopListening = deps.api.onRateLimited((delayMs) => {
    queue.pause();
    setTimeout(() => queue.start(), delayMs).unref();
  });
  let handled = 0;
  const tick = () => progress?.update('sending', handled, summary.valid, handled);
  // A database error while recording, a refused key or a platform that is down stops the push:
  // what was not sent stays pending or failed, and the next push sends it.
  let broken: unknown;
  const stop = (error: unknown) => {
    broken ??= error;
    queue.clear();
  };
  let unavailableInARow = 0;
  // Resolved once every staged row is planned (or the push stops), or once a second contact is
  // planned to be sent: whether this push sends one contact alone is then known.
  let knowAloneOrNot!: () => void;
  const aloneOrNot = new Promise<void>((resolve) => {
    knowAloneOrNot = resolve;
  });
  // Whether the platform took or refused a contact in this push: it is up, whatever it does with
  // one record. Before the first answer, the row log of earlier pushes tells.
  let platformAnswered = false;
  // The streak of a contact failed for the first time starts with this push.
  const pushStartedAt = options.dryRun ? new Date() : await databaseNow(db.knex);
  // Whether the platform answers at all now, asked only when a contact would be given up, and
  // again once the last answer is PROBE_FRESH_MS old: contacts it took earlier, even earlier in
  // this push, are no proof it is up now (an outage that began mid-push would otherwise give up
  // the contacts it left).
  const platformUpNow = answerFreshFor(PROBE_FRESH_MS, () => probePlatform(deps, signal));

  // A worker takes its next contact only once this one's outcome is stored. Tried again while the
  // database is unreachable: an answer dropped leaves its contact pending, sent again by the next
  // push (a second create, without external_id, where the platform does not match by email).
  const outcomes = new GroupCommit<{ key: string; outcome: ContactOutcome }>((batch) =>
    writeRetrying(() => recordOutcomes(db.knex, db, batch), {
      budgetMs: RECORD_OUTCOMES_BUDGET_MS,
      stop: signal,
      onRetry: (error, tries) =>
        log.warn(
          { err: deps.scrubber.scrub(describeError(error)), contacts: batch.length, attempt: tries },
          'contact outcomes not recorded; trying again',
        ),
    }),
  );
  const send = async (
    row: ContactRow,
    operation: PushOperation,
    streak: UnavailableStreak,
    clear: UpsertOptions['clear'],
  ) => {
    signal?.throwIfAborted();
    let answer: { id: string | null; created: boolean | null };
    try {
      answer = await deps.api.contacts.upsert(row.contact, signal, { clear });
    } catch (error) {
      if (signal?.aborted) throw error;
      await failed(row, operation, error, streak);
      return;
    }
    platformAnswered = true;
    // Outside the request's try: a database error recording a contact the platform accepted must
    // stop the push, never record it as failed (which the next push would send again).
    await outcomes.add({
      key: row.key,
      outcome: { sent: true, platformContactId: answer.id, cleared: clear },
    });
    const created = answer.created ?? operation === 'create';
    summary.sent++;
    unavailableInARow = 0;
    if (created) summary.created++;
    else summary.updated++;
    const outcome = created ? 'sent_created' : 'sent_updated';
    pushLog.add({ line: row.line, key: row.key, operation, outcome, contentHash: row.hash });
    await handledOne();
  };
  const failed = async (
    row: ContactRow,
    operation: PushOperation,
    error: unknown,
    prior: UnavailableStreak,
  ) => {
    let text = deps.scrubber.scrub(describeError(error));
    const result = contactAttemptResultOf(error, () => text);
    // Nothing can be sent until an operator acts: the contact stays pending, and so do those not
    // yet sent. Stopped before this task ends, so the queue starts no other.
    if (result.kind === 'unauthorized' || result.kind === 'misrouted') return stop(error);
    const heldOff = retryAfterStopOf(error);
    if (heldOff !== undefined) return askedToWait(row, heldOff, error);
    if (result.kind === 'refused') platformAnswered = true;
    const streak = streakAfterFailure(prior, result, error, pushStartedAt);
    // A record the platform chokes on, failed push after push while the platform still answers
    // (the probe): given up, so its export moves on instead of being pushed at every poll, and
    // not sent again until an export changes it (planPush). Only the outcome is recorded, never a
    // request added.
    const atLimit = streak.pushes > prior.pushes && streak.pushes >= GIVE_UP_AFTER_PUSHES;
    const givenUp = atLimit && (await notAnOutage(row, streak)) && (await platformUpNow());
    if (givenUp) text = givenUpError(streak, error, text);
    await outcomes.add({
      key: row.key,
      outcome: { sent: false, error: text, streak: givenUp ? streak : heldShortOfLimit(streak) },
    });
    summary.failed++;
    if (givenUp) summary.givenUp++;
    if (result.kind !== 'refused' && !givenUp) {
      // A 429 or a 503 too, when it asked for no wait the push must keep to (retryAfterStopOf).
      summary.unavailable++;
      if (++unavailableInARow >= STOP_AFTER_UNAVAILABLE_IN_A_ROW) {
        const down = `the platform failed ${unavailableInARow} contacts in a row (the last: ${text}); the push stops`;
        stop(new RetryableError(down, { cause: error }));
      }
    }
    log.warn({ line: row.line, contact_key: row.key, err: text }, 'contact push failed');
    pushLog.add({
      line: row.line,
      key: row.key,
      operation,
      outcome: 'failed',
      error: text,
      contentHash: row.hash,
    });
    await handledOne();
  };
  /**
   * The platform asked to wait (a 429, or a 503 for longer than the client's retries wait), and
   * the client's retries did not get through: every contact sent before the wait is over would meet
   * the same answer, so the push stops instead of sending them one after the other, each counted
   * against its own streak. The answer was about the platform, not this contact, nor those not
   * sent: they stay pending (no attempt counted), for the next push.
   */
  const askedToWait = (row: ContactRow, heldOff: RetryAfterStop, error: unknown) => {
    if (broken !== undefined) return;
    const { status } = heldOff;
    const seconds = Math.ceil(heldOff.retryAfterMs / 1000);
    const how = status === 429 ? 'rate-limits contacts' : 'is unavailable to contacts';
    log.warn(
      { line: row.line, contact_key: row.key, status, retry_after_seconds: seconds },
      `the platform ${how} past what the retries wait: the push stops, its contacts not sent stay pending`,
    );
    stop(
      new ContactsRetryAfterError(
        `the platform answered ${status} with a Retry-After of ${seconds} s, past what the client's retries wait (API_RETRY_BUDGET_SECONDS, API_MAX_RETRIES): the push stops, and its contacts not sent stay pending for the next push`,
        heldOff,
        { cause: error },
      ),
    );
  };
  /**
   * Whether a contact at its streak's limit failed for its own sake, not in an outage of the
   * contacts route that the probe (a GET of the review feed) would not see: the platform took or
   * refused another contact in this push or took one since the streak began; or this push sends
   * this contact alone (an export that changed it alone, which no other contact can vouch for);
   * or the streak has lasted GIVE_UP_AFTER_MS. Otherwise several contacts failing together, none
   * taken, look like that outage, and the export is kept, for an hour at most.
   */
  const notAnOutage = async (row: ContactRow, streak: UnavailableStreak): Promise<boolean> => {
    if (platformAnswered) return true;
    const since = streak.since ?? pushStartedAt;
    if (pushStartedAt.getTime() - since.getTime() >= GIVE_UP_AFTER_MS) return true;
    if (summary.toSend === 1) {
      // The only one so far: alone once every row is planned. Not a wait for the whole planning,
      // which may be waiting for room in the queue that only this worker can make (a worker of
      // one, behind which the rows planned since fill the queue): it ends at the second contact
      // planned to be sent too.
      await aloneOrNot;
      if (summary.toSend === 1) return true;
    }
    return platformTookContactsSince(db.knex, db, since, row.key);
  };
  const handledOne = async () => {
    handled++;
    tick();
    await pushLog.flush();
  };

  try {
    let after: StagedPosition | undefined;
    for (;;) {
      if (broken !== undefined) throw broken;
      signal?.throwIfAborted();
      const staged = await readStagedContacts(db.knex, db, pushId, after, PLAN_BATCH);
      if (staged.length === 0) break;
      const last = staged.at(-1)!.row;
      after = { line: last.line, key: last.key };
      const batch: Array<{
        row: ContactRow;
        operation: PushOperation;
        streak: UnavailableStreak;
        clear: UpsertOptions['clear'];
      }> = [];
      for (const { row, stored } of staged) {
        const operation = planPush(stored, row.hash, { full: options.full });
        if (operation === 'unchanged') {
          summary.unchanged++;
          handled++;
          pushLog.add({
            line: row.line,
            key: row.key,
            operation,
            outcome: 'unchanged',
            contentHash: row.hash,
          });
          continue;
        }
        if (operation === 'given_up') {
          // Given up on an earlier push: not sent, and named in the report, which says how to send
          // it again.
          const error = stillGivenUpError(stored?.error ?? null);
          summary.stillGivenUp++;
          handled++;
          log.info({ line: row.line, contact_key: row.key, err: error }, 'contact not sent: given up');
          await report.add({ line: row.line, field: '(row)', reason: error, key: row.key });
          pushLog.add({
            line: row.line,
            key: row.key,
            operation,
            outcome: 'failed',
            error,
            contentHash: row.hash,
          });
          continue;
        }
        if (++summary.toSend === 2) knowAloneOrNot();
        if (options.dryRun) handled++;
        // Failures of other content were not this content's; a contact given up and sent again
        // (a full push) begins a streak afresh.
        else
          batch.push({
            row,
            operation,
            streak: (stored?.hash === row.hash && !stored.givenUp && stored.streak) || NO_STREAK,
            // Emptied in the CRM since the mirror recorded a value: sent cleared, not left out.
            // Only where the export has the field's column (see ClearableFields).
            clear: {
              name: clearable.name && row.contact.name === null && (stored?.name ?? null) !== null,
              professional_id:
                clearable.professional_id &&
                row.contact.professional_id === null &&
                (stored?.professionalId ?? null) !== null,
            },
          });
      }
      // Recorded as pending before any of them is sent, and only while this replica still holds
      // the push's lease: after a takeover, the new holder alone sends.
      await db.knex.transaction(async (trx) => {
        await recordPending(
          trx,
          db,
          batch.map((b) => b.row),
        );
        await fence(trx);
      });
      for (const { row, operation, streak, clear } of batch) {
        queue.add(() => send(row, operation, streak, clear)).catch(stop);
      }
      tick();
      await pushLog.flush();
      // Backpressure: read the next batch only once the queue has room, so memory stays flat.
      await queue.onSizeLessThan(Math.max(options.concurrency * 4, PLAN_BATCH / 2));
    }
    knowAloneOrNot();
    await queue.onIdle();
    if (broken !== undefined) throw broken;
  } finally {
    knowAloneOrNot();
    // On an abort or an error, what was not started stays unsent (and is sent by the next push).
    queue.clear();
    await queue.onIdle();
    stopListening();
    await pushLog.flush(true);
  }
}

/** How long a probe's answer stands for the contacts given up after it. */
const PROBE_FRESH_MS = 30_000;

/**
 * Whether the platform answers now: a page of the review feed from this instant, which holds
 * nothing, so the probe costs one small GET. It goes through the client's retry policy, bounded by
 * its budget and the push's signal, so it cannot hang the push. Any error, an abort included, is
 * a no (no contact is given up, the export stays for the next poll), never a failure of the push.
 */
async function probePlatform(deps: PushContactsDeps, signal: AbortSignal | undefined): Promise<boolean> {
  try {
    await deps.api.reviews.page({ since: new Date(), cursor: null }, signal);
    return true;
  } catch (error) {
    deps.log.warn(
      { err: deps.scrubber.scrub(describeError(error)) },
      'the platform did not answer a probe: no contact is given up in this push',
    );
    return false;
  }
}

/**
 * A push stopped by a `Retry-After` (of a 429, or a 503) that outlasted the client's retries:
 * `retryAfterMs` is how long the platform asked to be left alone, which the inbox keeps to across
 * its polls; `status`, the answer that asked.
 */
export class ContactsRetryAfterError extends RetryableError implements RetryAfterStop {
  override readonly name = 'ContactsRetryAfterError';
  readonly status: number;
  readonly retryAfterMs: number;
  constructor(message: string, heldOff: RetryAfterStop, options?: ErrorOptions) {
    super(message, options);
    this.status = heldOff.status;
    this.retryAfterMs = heldOff.retryAfterMs;
  }
}

/**
 * A push's rows by outcome, named as `review_mirror_contacts_rows_total` (whose series start at 0
 * from the same list) and the run's counts name them.
 */
function rowOutcomes(summary: PushSummary): Record<ContactRowOutcome, number> {
  return {
    sent_created: summary.created,
    sent_updated: summary.updated,
    unchanged: summary.unchanged,
    rejected: summary.rejected,
    replaced: summary.replaced,
    failed: summary.failed,
    still_given_up: summary.stillGivenUp,
  };
}

function recordMetrics(deps: PushContactsDeps, summary: PushSummary, seconds: number): void {
  const m = deps.metrics;
  if (m === undefined) return;
  for (const [outcome, n] of Object.entries(rowOutcomes(summary))) m.contactsRows.inc({ outcome }, n);
  m.contactsPushDuration.observe(seconds);
  if (seconds > 0) m.contactsRowsPerSecond.set(summary.read / seconds);
  if (summary.failed === 0) m.contactsLastSuccess.set(Date.now() / 1000);
}
