/** The feed's sort key: a review's position is (created_at, id), newest first. */
export interface Keyed {
  readonly createdMs: number;
  readonly id: string;
}

/** Feed order, created_at DESC then id DESC: negative when `a` comes before `b`. */
export function compareNewestFirst(a: Keyed, b: Keyed): number {
  if (a.createdMs !== b.createdMs) return b.createdMs - a.createdMs;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/**
 * An array kept in feed order, so a page is two binary searches and a slice: the cost of a request
 * does not grow with the number of reviews. Inserts splice (a memmove, fine even at a million).
 */
export class NewestFirst<T extends Keyed> {
  #items: T[] = [];

  get size(): number {
    return this.#items.length;
  }

  get items(): readonly T[] {
    return this.#items;
  }

  /** First index whose item sorts at or after `key`. */
  lowerBound(key: Keyed): number {
    let lo = 0;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareNewestFirst(this.#items[mid]!, key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** First index whose item sorts strictly after `key`: where the page following a cursor starts. */
  upperBound(key: Keyed): number {
    let lo = 0;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareNewestFirst(this.#items[mid]!, key) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** First index created at or before `ms`: everything before it is strictly newer (an exclusive `since`). */
  notNewerThan(ms: number): number {
    let lo = 0;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#items[mid]!.createdMs > ms) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(item: T): void {
    this.#items.splice(this.lowerBound(item), 0, item);
  }

  remove(item: Keyed): boolean {
    const at = this.lowerBound(item);
    const found = this.#items[at];
    if (found === undefined || found.id !== item.id || found.createdMs !== item.createdMs) return false;
    this.#items.splice(at, 1);
    return true;
  }

  /** Adds many at once with one sort, the fast path for seeding. */
  addMany(items: readonly T[]): void {
    for (const item of items) this.#items.push(item);
    this.#items.sort(compareNewestFirst);
  }

  slice(start: number, end: number): T[] {
    return this.#items.slice(start, end);
  }

  clear(): void {
    this.#items = [];
  }
}
