interface Waiting<T, R> {
  readonly item: T;
  /** When it was added (performance.now()): its timeout counts from here, not from its write. */
  readonly addedMs: number;
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
   * Longest a caller waits, from its add(), for its item to be written. Past it, `onTimeout` gives
   * the error every caller of the batch is rejected with, and the write is left to finish or fail
   * on its own while the next batch goes ahead: one stalled connection cannot hold every later
   * item. Counted from add(), not from the write's start, so an item queued behind stalled writes
   * is answered in time too: a batch is given up on when its oldest item's time is up (its younger
   * items with it), and an item whose time is up before its write starts is failed unwritten.
   */
  readonly timeout?: { readonly ms: number; readonly onTimeout: (batchSize: number) => Error };
  /**
   * Once the write in flight has run this long, the items waiting behind it start a second write
   * beside it instead of waiting for it to end (at most two at once). A database whose commits
   * stall now and then (a checkpoint's fsync) then delays an item by one stall, not by the stalled
   * commit and then its own. Unset: one write at a time.
   */
  readonly overlapAfterMs?: number;
  /** Called when a write's items fail for good (not when a refused batch is split to isolate one). */
  readonly onFailure?: (error: unknown, batchSize: number) => void;
}

/** Writes in flight at once when `overlapAfterMs` is set: the slow one and one beside it. */
const MAX_OVERLAPPING_WRITES = 2;

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
  readonly #overlapAfterMs: number | undefined;
  readonly #onFailure: GroupCommitOptions['onFailure'];
  #waiting: Waiting<T, R>[] = [];
  /** When each write in flight started (performance.now()); a timed-out write is no longer counted. */
  readonly #inFlight = new Set<{ readonly startedMs: number }>();
  /** A write is due after the current turn. */
  #due = false;
  #overlapTimer: NodeJS.Timeout | undefined;
  #idle: Array<() => void> = [];

  constructor(write: BatchWrite<T, R>, options: GroupCommitOptions = {}) {
    this.#write = write;
    this.#maxBatch = options.maxBatch ?? Number.POSITIVE_INFINITY;
    this.#isolateWhen = options.isolateWhen;
    this.#timeout = options.timeout;
    this.#overlapAfterMs = options.overlapAfterMs;
    this.#onFailure = options.onFailure;
  }

  /** Resolves with the item's result once it is written; rejects when its write failed or timed out. */
  add(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ item, addedMs: performance.now(), resolve, reject });
      this.#schedule();
    });
  }

  /** Resolves once every item added so far has been written or has failed. */
  idle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #isIdle(): boolean {
    return this.#waiting.length === 0 && this.#inFlight.size === 0 && !this.#due;
  }

  #schedule(): void {
    if (this.#waiting.length === 0 || this.#due) return;
    if (this.#inFlight.size === 0) {
      // After the current turn, so items added together go together.
      this.#due = true;
      setImmediate(() => {
        this.#due = false;
        this.#start();
      });
      return;
    }
    this.#armOverlap();
  }

  /** Starts a second write for the waiting items once the write in flight has run `overlapAfterMs`. */
  #armOverlap(): void {
    const after = this.#overlapAfterMs;
    if (after === undefined || this.#overlapTimer !== undefined) return;
    if (this.#inFlight.size >= MAX_OVERLAPPING_WRITES) return;
    this.#overlapTimer = setTimeout(
      () => {
        this.#overlapTimer = undefined;
        if (this.#waiting.length === 0 || this.#inFlight.size === 0 || this.#due) return;
        if (this.#inFlight.size >= MAX_OVERLAPPING_WRITES) return;
        if (performance.now() - this.#newestStartMs() >= after) this.#start();
        else this.#armOverlap(); // a write started meanwhile: wait for that one in turn
      },
      Math.max(0, this.#newestStartMs() + after - performance.now()),
    );
  }

  /** When the most recently started write in flight began (performance.now()). */
  #newestStartMs(): number {
    return Math.max(...[...this.#inFlight].map((w) => w.startedMs));
  }

  #start(): void {
    this.#failExpired();
    const batch = this.#waiting.splice(0, this.#maxBatch);
    if (batch.length === 0) {
      this.#settled();
      return;
    }
    const write = { startedMs: performance.now() };
    this.#inFlight.add(write);
    let timer: NodeJS.Timeout | undefined;
    const release = () => {
      clearTimeout(timer);
      if (this.#inFlight.delete(write)) this.#afterWrite();
    };
    const timeout = this.#timeout;
    if (timeout !== undefined) {
      timer = setTimeout(
        () => {
          if (!this.#inFlight.has(write)) return;
          // Settling a promise twice is a no-op: if the write ends later, its outcome is ignored.
          const error = timeout.onTimeout(batch.length);
          for (const w of batch) w.reject(error);
          release();
        },
        Math.max(0, batch[0]!.addedMs + timeout.ms - performance.now()),
      );
    }
    void this.#writeIsolating(batch).then(release);
  }

  /**
   * Fails, unwritten, the waiting items whose time is up (the oldest, at the head of the queue, as
   * when a batch ahead of them just timed out): their callers are answered now, and a stalled
   * database is not sent writes nobody waits for.
   */
  #failExpired(): void {
    const timeout = this.#timeout;
    if (timeout === undefined) return;
    const now = performance.now();
    const due = this.#waiting.findIndex((w) => w.addedMs + timeout.ms > now);
    const expired = this.#waiting.splice(0, due === -1 ? this.#waiting.length : due);
    if (expired.length === 0) return;
    const error = timeout.onTimeout(expired.length);
    for (const w of expired) w.reject(error);
  }

  /** A write ended (or was given up on): the next batch goes at once, as it waited a whole write. */
  #afterWrite(): void {
    if (this.#waiting.length > 0 && !this.#due) {
      if (this.#inFlight.size === 0) this.#start();
      else this.#armOverlap();
      return;
    }
    this.#settled();
  }

  #settled(): void {
    if (!this.#isIdle()) return;
    const waiters = this.#idle;
    this.#idle = [];
    for (const resolve of waiters) resolve();
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
