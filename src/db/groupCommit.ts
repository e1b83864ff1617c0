interface Waiting<T> {
  readonly item: T;
  readonly settle: (error?: unknown) => void;
}

/**
 * Group commit: each caller waits until its item is written, as if it wrote it alone, but the items
 * that arrive in the same turn of the event loop, or while one write runs, go together in the
 * next. Writers bounded by a concurrency limit so leave at most their in-flight items unwritten
 * when killed, at one statement per batch instead of one per item.
 */
export class GroupCommit<T> {
  #waiting: Waiting<T>[] = [];
  #draining = false;

  constructor(private readonly write: (items: readonly T[]) => Promise<void>) {}

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ item, settle: (error) => (error === undefined ? resolve() : reject(error)) });
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
          await this.write(batch.map((w) => w.item));
          for (const w of batch) w.settle();
        } catch (error) {
          for (const w of batch) w.settle(error ?? new Error('not written'));
        }
      }
    } finally {
      this.#draining = false;
    }
  }
}
