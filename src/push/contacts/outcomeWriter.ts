import type { Db } from '../../db/connect.js';
import { type ContactOutcome, recordOutcomes } from './contactsSql.js';

interface Waiting {
  readonly key: string;
  readonly outcome: ContactOutcome;
  readonly settle: (error?: unknown) => void;
}

/**
 * Group commit of contact outcomes: each sender waits until its outcome is stored, as if it wrote
 * it alone, but the outcomes that arrive while one statement runs go together in the next. A
 * killed push so leaves at most the requests in flight unrecorded, at one statement per batch
 * instead of one per contact.
 */
export class OutcomeWriter {
  #waiting: Waiting[] = [];
  #draining = false;

  constructor(private readonly db: Db) {}

  record(key: string, outcome: ContactOutcome): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({
        key,
        outcome,
        settle: (error) => (error === undefined ? resolve() : reject(error)),
      });
      // Outcomes settled in the same turn of the event loop go in one statement.
      if (!this.#draining) {
        this.#draining = true;
        setImmediate(() => void this.#drain());
      }
    });
  }

  async #drain(): Promise<void> {
    try {
      while (this.#waiting.length > 0) {
        const batch = this.#waiting.splice(0);
        try {
          await recordOutcomes(this.db.knex, this.db, batch);
          for (const w of batch) w.settle();
        } catch (error) {
          for (const w of batch) w.settle(error ?? new Error('outcome not recorded'));
        }
      }
    } finally {
      this.#draining = false;
    }
  }
}
