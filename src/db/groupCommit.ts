interface Waiting<T, R> {
  readonly item: T;
  readonly resolve: (result: R) => void;
  readonly reject: (error: unknown) => void;
}

/** Writes a batch durably: one result per item, in order, or none (every caller then gets undefined). */
// biome-ignore lint/suspicious/noConfusingVoidType: a writer with no results is an async function returning nothing.
type BatchWrite<T, R> = (items: readonly T[]) => Promise<readonly R[] | void>;

export interface GroupCommitOptions {
  /** Most items in one write; the rest wait for the next. Unbounded by default. */
  readonly maxBatch?: number;
  /**
   * A write that fails with an error this accepts is tried again in halves, down to single items,
   * so the one item the database refuses fails alone and the others are written.
   */
  readonly isolateWhen?: (error: unknown) => boolean;
  /**
   * Longest a caller waits for its batch's write. Past it, `onTimeout` gives the error every
   * caller of the batch is rejected with, and the write is left to finish or fail on its own while
   * the next batch goes ahead: one stalled connection cannot hold every later item.
   */
  readonly timeout?: { readonly ms: number; readonly onTimeout: (batchSize: number) => Error };
  /** Called when a write's items fail for good (not when a refused batch is split to isolate one). */
  readonly onFailure?: (error: unknown, batchSize: number) => void;
}

/**
 * Group commit: each caller waits until its item is written, as if it wrote it alone, but the items
 * that arrive in the same turn of the event loop, or while one write runs, go together in the
 * next. Under a burst the batch grows instead of the queue of transactions, and an item waits at
 * most about two writes. Writers bounded by a concurrency limit leave at most their in-flight items
 * unwritten when killed, at one statement per batch instead of one per item.
 */
export class GroupCommit<T, R = void> {
  readonly #write: BatchWrite<T, R>;
  readonly #maxBatch: number;
  readonly #isolateWhen: ((error: unknown) => boolean) | undefined;
  readonly #timeout: GroupCommitOptions['timeout'];
  readonly #onFailure: GroupCommitOptions['onFailure'];
  #waiting: Waiting<T, R>[] = [];
  #draining: Promise<void> | undefined;

  constructor(write: BatchWrite<T, R>, options: GroupCommitOptions = {}) {
    this.#write = write;
    this.#maxBatch = options.maxBatch ?? Number.POSITIVE_INFINITY;
    this.#isolateWhen = options.isolateWhen;
    this.#timeout = options.timeout;
    this.#onFailure = options.onFailure;
  }

  /** Resolves with the item's result once it is written; rejects when its write failed or timed out. */
  add(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ item, resolve, reject });
      this.#kick();
    });
  }

  /** Resolves once every item added so far has been written or has failed. */
  async idle(): Promise<void> {
    while (this.#draining) await this.#draining;
  }

  #kick(): void {
    if (this.#draining) return;
    // After the current turn, so items added together go together.
    this.#draining = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.#drain())
      .finally(() => {
        this.#draining = undefined;
        // An item may have been added between the last batch and this point.
        if (this.#waiting.length > 0) this.#kick();
      });
  }

  async #drain(): Promise<void> {
    while (this.#waiting.length > 0) {
      const batch = this.#waiting.splice(0, this.#maxBatch);
      const written = this.#writeIsolating(batch);
      const timeout = this.#timeout;
      if (timeout === undefined) {
        await written;
        continue;
      }
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), timeout.ms);
      });
      const first = await Promise.race([written.then(() => 'written' as const), late]);
      clearTimeout(timer);
      if (first === 'late') {
        // Settling a promise twice is a no-op: if the write ends later, its outcome is ignored.
        const error = timeout.onTimeout(batch.length);
        for (const w of batch) w.reject(error);
      }
    }
  }

  /** Writes `batch` and settles its callers; never rejects. */
  async #writeIsolating(batch: readonly Waiting<T, R>[]): Promise<void> {
    try {
      const results = await this.#write(batch.map((w) => w.item));
      for (const [i, w] of batch.entries()) w.resolve(results?.[i] as R);
    } catch (error) {
      if (batch.length > 1 && this.#isolateWhen?.(error)) {
        const half = Math.ceil(batch.length / 2);
        await this.#writeIsolating(batch.slice(0, half));
        await this.#writeIsolating(batch.slice(half));
        return;
      }
      this.#onFailure?.(error, batch.length);
      for (const w of batch) w.reject(error ?? new Error('not written'));
    }
  }
}
