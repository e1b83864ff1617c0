import type { Pagination } from './schema.js';

/** One page of a cursor walk, with the cursor to checkpoint once the page is safely stored. */
export interface Page<T> {
  readonly items: T[];
  /** The cursor that continues the walk after this page; null when this page is the last. */
  readonly nextCursor: string | null;
  /** When the response arrived: the platform-side version time of what it carried. */
  readonly receivedAt: Date;
}

export type FetchPage<T> = (cursor: string | null, signal: AbortSignal) => Promise<Page<T>>;

/**
 * The cursor after a page, or null at the end. Spec 4.3: has_more false means the end; a page
 * claiming more without a cursor cannot be followed, so it ends the walk too.
 */
export function continuationOf(pagination: Pagination): string | null {
  return pagination.has_more ? pagination.next_cursor : null;
}

/**
 * Walks pages from `startCursor` (null: the first page) to the end, fetching page N+1 while the
 * caller is still handling page N (a one-page lookahead: memory holds at most two pages).
 * Leaving the loop early aborts the lookahead; its failure then goes unobserved, on purpose.
 */
export async function* paginate<T>(
  fetchPage: FetchPage<T>,
  startCursor: string | null,
  signal?: AbortSignal,
): AsyncGenerator<Page<T>> {
  const lookahead = new AbortController();
  const onAbort = () => lookahead.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  const start = (cursor: string | null) => {
    const pending = fetchPage(cursor, lookahead.signal);
    pending.catch(() => {}); // observed when awaited; unobserved if the caller stops first
    return pending;
  };
  try {
    let pending = start(startCursor);
    for (;;) {
      const page = await pending;
      if (page.nextCursor !== null) pending = start(page.nextCursor);
      yield page;
      if (page.nextCursor === null) return;
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    lookahead.abort();
  }
}
