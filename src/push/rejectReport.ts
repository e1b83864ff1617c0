import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { stringify } from 'csv-stringify';

export interface ReportRow {
  readonly line: number;
  readonly field: string;
  readonly reason: string;
  readonly key?: string | null;
}

/**
 * The rows of an export that were not sent as they stand, as CSV beside the input (`FILE.rejects.csv`):
 * rejected rows with the field and the reason, and rows a later row with the same key replaced.
 */
export class RejectReport {
  readonly path: string;
  readonly #csv = stringify({ header: true, columns: ['line', 'field', 'reason', 'key'] });
  readonly #done: Promise<unknown>;
  rows = 0;

  constructor(inputPath: string) {
    this.path = `${inputPath}.rejects.csv`;
    const out = createWriteStream(this.path);
    this.#csv.pipe(out);
    this.#done = once(out, 'close');
  }

  async add(row: ReportRow): Promise<void> {
    this.rows++;
    if (!this.#csv.write([row.line, row.field, row.reason, row.key ?? ''])) await once(this.#csv, 'drain');
  }

  async close(): Promise<void> {
    this.#csv.end();
    await this.#done;
  }
}
