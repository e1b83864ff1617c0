import PQueue from 'p-queue';
import type { ContactMapping } from '../../config/configFile.js';
import type { Db } from '../../db/connect.js';
import { describeError } from '../../errors.js';
import { addCount, type RunCounts } from '../../jobs/runCounts.js';
import type { Logger, SecretScrubber } from '../../log.js';
import type { PartnerApi } from '../../partner-api/client.js';
import { type ReadOptions, readRecords } from '../readRecords.js';
import { RejectReport } from '../rejectReport.js';
import { type ContactRow, toContactRow } from './contactRow.js';
import {
  appendPushLog,
  type PushLogEntry,
  prunePushLog,
  readStoredContacts,
  recordOutcome,
  recordPending,
} from './contactsSql.js';
import { type PushOperation, planPush } from './planPush.js';

export interface PushContactsDeps {
  readonly db: Db;
  readonly api: Pick<PartnerApi, 'contacts' | 'onRateLimited'>;
  readonly log: Logger;
  readonly scrubber: SecretScrubber;
}

export interface PushContactsOptions extends ReadOptions {
  readonly mapping: ContactMapping;
  /** Re-send every valid contact, changed or not. */
  readonly full: boolean;
  /** Read, validate and diff; send nothing and record nothing but the report. */
  readonly dryRun: boolean;
  /** Requests in flight at once. */
  readonly concurrency: number;
  /** Requests started per second, across every worker. */
  readonly ratePerSecond: number;
  readonly logRetentionDays: number;
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
  failed: number;
  reportPath: string;
}

const KEY_BATCH = 1_000;
const LOG_BATCH = 500;

/**
 * Pushes the contacts of a CRM export: streams and validates every row (rejects to the report
 * and the row log), keeps the last row of each key, sends only new, changed or previously failed
 * contacts — each recorded as pending before its request and with its outcome after, so a
 * process killed mid-file sends at most the requests in flight again on the next push, which the
 * platform's upsert makes harmless — with bounded concurrency and one rate limit for every worker.
 */
export async function pushContacts(
  deps: PushContactsDeps,
  file: string,
  options: PushContactsOptions,
  counts: RunCounts,
  run: { runId: number | undefined },
  signal?: AbortSignal,
): Promise<PushSummary> {
  const { db, log } = deps;
  const report = new RejectReport(file);
  const logBuffer: PushLogEntry[] = [];
  const flushLog = async (force = false) => {
    if (options.dryRun || (logBuffer.length < LOG_BATCH && !force)) return;
    await appendPushLog(db.knex, db, { runId: run.runId, file }, logBuffer.splice(0));
  };
  const summary: PushSummary = {
    read: 0,
    valid: 0,
    rejected: 0,
    replaced: 0,
    unchanged: 0,
    toSend: 0,
    sent: 0,
    failed: 0,
    reportPath: report.path,
  };

  // Memory grows with distinct keys only (the last row of each), never with the file's size.
  const latest = new Map<string, ContactRow>();
  try {
    for await (const item of readRecords(file, options)) {
      signal?.throwIfAborted();
      summary.read++;
      const row = 'error' in item ? item.error : toContactRow(item.record, options.mapping);
      if (!('key' in row)) {
        summary.rejected++;
        await report.add(row);
        logBuffer.push({
          line: row.line,
          key: null,
          operation: 'rejected',
          outcome: 'rejected',
          error: `${row.field}: ${row.reason}`,
        });
        await flushLog();
        continue;
      }
      const earlier = latest.get(row.key);
      if (earlier !== undefined) {
        summary.replaced++;
        await report.add({
          line: earlier.line,
          field: '(row)',
          reason: `replaced by line ${row.line} (same key)`,
          key: row.key,
        });
        logBuffer.push({
          line: earlier.line,
          key: row.key,
          operation: 'replaced',
          outcome: 'replaced',
          error: `replaced by line ${row.line}`,
        });
      }
      latest.set(row.key, row);
    }
  } finally {
    await report.close();
  }
  summary.valid = latest.size;

  const toSend: Array<{ row: ContactRow; operation: PushOperation }> = [];
  const rows = [...latest.values()];
  for (let i = 0; i < rows.length; i += KEY_BATCH) {
    const batch = rows.slice(i, i + KEY_BATCH);
    const stored = await readStoredContacts(
      db.knex,
      db,
      batch.map((r) => r.key),
    );
    for (const row of batch) {
      const operation = planPush(stored.get(row.key), row.hash, { full: options.full });
      if (operation === 'unchanged') {
        summary.unchanged++;
        logBuffer.push({
          line: row.line,
          key: row.key,
          operation,
          outcome: 'unchanged',
          contentHash: row.hash,
        });
      } else toSend.push({ row, operation });
    }
    await flushLog();
  }
  summary.toSend = toSend.length;
  if (options.dryRun) return summary;

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
  const send = async ({ row, operation }: (typeof toSend)[number]) => {
    signal?.throwIfAborted();
    await recordPending(db.knex, db, row);
    try {
      const answer = await deps.api.contacts.upsert(row.contact, signal);
      await recordOutcome(db.knex, db, row.key, { sent: true, platformContactId: answer.id });
      const created = answer.created ?? operation === 'create';
      summary.sent++;
      addCount(counts, created ? 'sent_created' : 'sent_updated');
      logBuffer.push({
        line: row.line,
        key: row.key,
        operation,
        outcome: created ? 'sent_created' : 'sent_updated',
        contentHash: row.hash,
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      const text = deps.scrubber.scrub(describeError(error));
      await recordOutcome(db.knex, db, row.key, { sent: false, error: text });
      summary.failed++;
      log.warn({ line: row.line, key: row.key, err: text }, 'contact push failed');
      logBuffer.push({
        line: row.line,
        key: row.key,
        operation,
        outcome: 'failed',
        error: text,
        contentHash: row.hash,
      });
    }
    await flushLog();
  };
  try {
    await Promise.all(toSend.map((item) => queue.add(() => send(item))));
  } finally {
    // On an abort, what was not started stays unsent (and is sent by the next push).
    queue.clear();
    await queue.onIdle();
    stopListening();
    await flushLog(true);
  }
  await prunePushLog(db.knex, db, options.logRetentionDays);
  for (const [name, n] of Object.entries({
    read: summary.read,
    rejected: summary.rejected,
    unchanged: summary.unchanged,
    failed: summary.failed,
  })) {
    addCount(counts, name, n);
  }
  return summary;
}
