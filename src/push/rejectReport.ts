import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { appendFile, stat } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify';
import { stringify as stringifyRows } from 'csv-stringify/sync';

export interface ReportRow {
  readonly line: number;
  readonly field: string;
  readonly reason: string;
  readonly key?: string | null;
}

const COLUMNS = ['line', 'field', 'reason', 'key'];

export const REPORT_SUFFIX = '.rejects.csv';

/** Where the report of the export at `inputPath` is written: beside it. */
export const reportPathOf = (inputPath: string): string => `${inputPath}${REPORT_SUFFIX}`;

/**
 * Whether `name` is a report's (`FILE.rejects.csv`, in any case): one left beside an export by a
 * killed push has an export's extension, and must never be taken for one.
 */
export const isReportName = (name: string): boolean => name.toLowerCase().endsWith(REPORT_SUFFIX);

/** For what may not be there (gone: undefined); anything else failing is not passed over. */
export function ignoreGone(error: NodeJS.ErrnoException): undefined {
  if (error.code !== 'ENOENT') throw error;
  return undefined;
}

/**
 * The rows of an export that were not sent as they stand, as CSV beside the input (`FILE.rejects.csv`):
 * rejected rows with the field and the reason, rows a later row with the same key replaced, and
 * contacts given up on an earlier push that it holds unchanged.
 */
export class RejectReport {
  readonly path: string;
  readonly #csv = stringify({ header: true, columns: COLUMNS });
  readonly #done: Promise<void>;
  #failure: Error | undefined;
  rows = 0;

  constructor(inputPath: string) {
    this.path = reportPathOf(inputPath);
    // A report that cannot be written (a full disk, a read-only export directory) fails the push
    // that writes it, through add() and close(): never as an error nobody awaits, which would end
    // the whole process.
    this.#done = pipeline(this.#csv, createWriteStream(this.path)).catch((error: Error) => {
      this.#failure ??= new Error(`the report ${this.path} could not be written: ${error.message}`, {
        cause: error,
      });
    });
  }

  async add(row: ReportRow): Promise<void> {
    this.#throwIfFailed();
    this.rows++;
    if (!this.#csv.write([row.line, row.field, row.reason, row.key ?? ''])) {
      // A stream that failed never drains: waiting ends with it, and with its failure.
      await Promise.race([once(this.#csv, 'drain').catch(() => this.#done), this.#done]);
      this.#throwIfFailed();
    }
  }

  /** Ends the report; again, it only waits for that end. */
  async close(): Promise<void> {
    if (!this.#csv.writableEnded) this.#csv.end();
    await this.#done;
    this.#throwIfFailed();
  }

  #throwIfFailed(): void {
    if (this.#failure !== undefined) throw this.#failure;
  }
}

/**
 * Adds to the report of the export at `inputPath` why the export was refused as a whole, as a row
 * with no line and no field after the rows it holds: an operator finds it where the reasons of
 * the rows are. A report not written yet (a file refused before it was read) is begun with it.
 */
export async function addFileReason(inputPath: string, reason: string): Promise<void> {
  const path = reportPathOf(inputPath);
  const begun = ((await stat(path).catch(ignoreGone))?.size ?? 0) > 0;
  await appendFile(path, stringifyRows([['', '', reason, '']], { header: !begun, columns: COLUMNS }));
}
