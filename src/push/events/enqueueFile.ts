import type { Db } from '../../db/connect.js';
import { type FileIdentity, openExport } from '../exportFile.js';
import { type Encoding, formatOf, readRecords } from '../readRecords.js';
import { RejectReport } from '../rejectReport.js';
import { EVENT_FILE_COLUMNS, eventFromRecord } from './eventInput.js';
import { enqueueEvents, type NewEvent } from './outboxSql.js';

const ENQUEUE_BATCH = 500;

export interface EnqueueFileSummary {
  read: number;
  enqueued: number;
  /** Keys already in the outbox or sent before: not sent again. */
  known: number;
  rejected: number;
  reportPath: string;
}

/**
 * Streams an events file (CSV or JSON Lines, `event_id` the key) into the outbox: each bad row to
 * the report beside it with its line, field and reason, the others enqueued a batch at a time.
 * Within one file the first row of a key is the event (enqueueing is first-wins). A CSV header
 * without a column every row needs (EVENT_FILE_COLUMNS) fails the file as a whole.
 */
export async function enqueueEventsFile(
  db: Db,
  file: string,
  options: {
    encoding?: Encoding | undefined;
    /** The file the inbox took under this name: only that one is read (see openExport). */
    sameAs?: FileIdentity | undefined;
  } = {},
): Promise<EnqueueFileSummary> {
  const { bytes } = await openExport(file, options.sameAs);
  const report = new RejectReport(file);
  const summary: EnqueueFileSummary = {
    read: 0,
    enqueued: 0,
    known: 0,
    rejected: 0,
    reportPath: report.path,
  };
  let batch: NewEvent[] = [];
  const flush = async () => {
    const added = await enqueueEvents(db.knex, db, batch);
    summary.enqueued += added;
    summary.known += batch.length - added;
    batch = [];
  };
  try {
    const read = { format: formatOf(file), encoding: options.encoding, ...EVENT_FILE_COLUMNS };
    for await (const item of readRecords(bytes, read)) {
      summary.read++;
      const event = 'error' in item ? item.error : eventFromRecord(item.record);
      if ('line' in event) {
        summary.rejected++;
        await report.add(event);
        continue;
      }
      batch.push(event);
      if (batch.length >= ENQUEUE_BATCH) await flush();
    }
    await flush();
  } finally {
    bytes.destroy();
    await report.close();
  }
  return summary;
}
