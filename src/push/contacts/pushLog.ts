import type { Db } from '../../db/connect.js';
import { appendPushLog, type PushLogEntry } from './contactsSql.js';

const LOG_BATCH = 500;

/** The row log of one push, written in batches; a dry run writes nothing. */
export class PushLogWriter {
  readonly #entries: PushLogEntry[] = [];

  constructor(
    private readonly db: Db,
    private readonly run: { runId: number | undefined; file: string },
    private readonly enabled: boolean,
  ) {}

  add(entry: PushLogEntry): void {
    if (this.enabled) this.#entries.push(entry);
  }

  /** Writes what is buffered once a batch is full, or all of it when forced. */
  async flush(force = false): Promise<void> {
    if (this.#entries.length === 0 || (this.#entries.length < LOG_BATCH && !force)) return;
    await appendPushLog(this.db.knex, this.db, this.run, this.#entries.splice(0));
  }
}
