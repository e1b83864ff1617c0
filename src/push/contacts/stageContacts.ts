import type { Readable } from 'node:stream';
import type { ContactMapping, EventRule } from '../../config/configFile.js';
import type { Db } from '../../db/connect.js';
import { eventsOfRow } from '../events/contactRules.js';
import type { NewEvent } from '../events/outboxSql.js';
import { type ReadOptions, readRecords } from '../readRecords.js';
import type { RejectReport } from '../rejectReport.js';
import { type ContactRow, columnsReadOf, requiredColumnsOf, toContactRow } from './contactRow.js';
import { stageContactRows } from './contactsSql.js';
import type { PushLogWriter } from './pushLog.js';

const STAGE_BATCH = 1_000;

export interface StageCounts {
  read: number;
  rejected: number;
  replaced: number;
  /** Distinct valid keys staged: what the diff compares. */
  valid: number;
  /** Events the rules fired that were new to the outbox. */
  events: number;
}

export interface StageOutput {
  readonly report: RejectReport;
  readonly pushLog: PushLogWriter;
  /** Where rule events go (absent on a dry run); returns how many were new. */
  readonly enqueue?: ((events: readonly NewEvent[]) => Promise<number>) | undefined;
}

/**
 * The fields a contact may be sent cleared in (see pushContacts' `clear`), and whether the export
 * has a column for each: in its CSV header, or as a key of some JSON Lines record. A column the
 * export lacks says nothing of the value (renamed, or left out of this export), not that the CRM
 * emptied it: read as empty, it cleared every contact's value on the platform. Per export, not
 * per row, since the staged rows keep no more than their values (a JSON Lines record without a
 * key that others of its file have is taken as emptied, as a CSV cell left empty is).
 */
export interface ClearableFields {
  name: boolean;
  professional_id: boolean;
}

/**
 * Streams the export (counting into `counts` as it goes, for a progress bar) into the push's staging rows: every invalid row to the report and the row
 * log, the last row of each key staged (the rows it replaced reported). Memory holds one batch.
 * Returns which clearable fields the export has a column for.
 */
export async function stageContacts(
  db: Db,
  pushId: string,
  source: Readable,
  options: ReadOptions & { readonly mapping: ContactMapping; readonly rules?: readonly EventRule[] },
  out: StageOutput,
  counts: StageCounts,
  signal?: AbortSignal,
): Promise<ClearableFields> {
  const present: ClearableFields = { name: false, professional_id: false };
  let batch = new Map<string, ContactRow>();
  // The events each batch's last row of a key fires, enqueued once the batch is staged.
  let fired = new Map<string, NewEvent[]>();
  let writing: Promise<void> = Promise.resolve();
  const replaced = async (earlierLine: number, row: ContactRow) => {
    counts.replaced++;
    await out.report.add({
      line: earlierLine,
      field: '(row)',
      reason: `replaced by line ${row.line} (same key)`,
      key: row.key,
    });
    out.pushLog.add({
      line: earlierLine,
      key: row.key,
      operation: 'replaced',
      outcome: 'replaced',
      error: `replaced by line ${row.line}`,
    });
  };
  const stageBatch = async (rows: ContactRow[], events: NewEvent[]) => {
    const earlier = await stageContactRows(db.knex, db, pushId, rows);
    if (out.enqueue !== undefined && events.length > 0) counts.events += await out.enqueue(events);
    counts.valid += rows.length - earlier.size;
    for (const row of rows) {
      const line = earlier.get(row.key);
      if (line !== undefined) await replaced(line, row);
    }
    await out.pushLog.flush();
  };

  const read = {
    ...options,
    requiredColumns: requiredColumnsOf(options.mapping, options.rules),
    columnsRead: columnsReadOf(options.mapping, options.rules),
  };
  for await (const item of readRecords(source, read)) {
    signal?.throwIfAborted();
    counts.read++;
    const row = 'error' in item ? item.error : toContactRow(item.record, options.mapping);
    if (!('key' in row)) {
      counts.rejected++;
      await out.report.add(row);
      out.pushLog.add({
        line: row.line,
        key: null,
        operation: 'rejected',
        outcome: 'rejected',
        error: `${row.field}: ${row.reason}`,
      });
      continue;
    }
    if ('record' in item) {
      present.name ||= item.record.fields[options.mapping.columns.name] !== undefined;
      present.professional_id ||= item.record.fields[options.mapping.columns.professional_id] !== undefined;
    }
    const earlier = batch.get(row.key);
    if (earlier !== undefined) {
      batch.delete(row.key);
      await replaced(earlier.line, row);
    }
    batch.set(row.key, row);
    if (options.rules !== undefined && options.rules.length > 0 && 'record' in item) {
      fired.set(row.key, eventsOfRow(item.record.fields, row, options.rules));
    }
    if (batch.size >= STAGE_BATCH) {
      // One batch is written while the next is parsed; never more, so memory stays flat.
      await writing;
      writing = stageBatch([...batch.values()], [...fired.values()].flat());
      // Its failure is thrown where it is awaited, not as an unhandled rejection meanwhile.
      writing.catch(() => undefined);
      batch = new Map();
      fired = new Map();
    }
  }
  await writing;
  await stageBatch([...batch.values()], [...fired.values()].flat());
  return present;
}
