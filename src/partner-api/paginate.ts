import { unstorableReason } from '../db/storableText.js';
import type { Logger } from '../log.js';
import { ApiProtocolError } from './errors.js';
import type { Pagination } from './paginationSchema.js';
import { type RecordSchema, type RejectedRecord, splitValid } from './validRecords.js';

/** One page of a cursor walk, with the cursor to checkpoint once the page is safely stored. */
export interface Page<T> {
  readonly items: T[];
  /** The cursor that continues the walk after this page; null when this page is the last. */
  readonly nextCursor: string | null;
  /** When the response arrived: the platform-side version time of what it carried. */
  readonly receivedAt: Date;
  /** Records of the page that failed their schema, for the quarantine (absent: none). */
  readonly rejected?: readonly RejectedRecord[];
  /**
   * The page's `pagination.count` when it differs from the records the page holds (absent: they
   * agree, or the page sent no count). Not an error (see countMismatchOf): `paginate` logs it.
   */
  readonly countMismatch?: CountMismatch;
  /**
   * The page said `has_more: false` yet sent a `next_cursor`: the spec's rules disagree on it (4.3:
   * has_more false is the end; read until next_cursor is null). Taken as the end, as the first
   * says, but not silently, since the other would read on: `paginate` logs it.
   */
  readonly cursorIgnored?: true;
}

/** A page's `pagination.count` and the records it holds, when the two differ. */
interface CountMismatch {
  readonly count: number;
  readonly records: number;
}

export type FetchPage<T> = (cursor: string | null, signal: AbortSignal) => Promise<Page<T>>;

/**
 * The cursor after a page, or null at the end. Spec 4.3: has_more false means the end (a cursor
 * beside it is ignored). A cursor null, `""` or absent is no cursor (paginationSchema.ts): `""`
 * sent back as `cursor=` would ask for the first page again. A page claiming more without a
 * cursor is a protocol violation, never an end: taken as one, it would move the watermark past
 * unread reviews and mark them removed.
 */
export function continuationOf(pagination: Pagination, route: string): string | null {
  if (!pagination.has_more) return null;
  const next = pagination.next_cursor;
  if (!hasCursor(pagination)) {
    const sent = next === undefined ? 'absent' : next === null ? 'null' : 'empty';
    throw new ApiProtocolError(route, `has_more is true but next_cursor is ${sent}`);
  }
  return pagination.next_cursor;
}

/** Whether a page sent a cursor: null, `""` and absent are none (paginationSchema.ts). */
const hasCursor = (pagination: Pagination): pagination is Pagination & { next_cursor: string } =>
  typeof pagination.next_cursor === 'string' && pagination.next_cursor !== '';

/**
 * Fails a page holding more records than the `limit` asked for: a platform that ignores it sends
 * a page other than the one asked for, and each record costs a validation (this check comes
 * before any of them is validated).
 */
function checkPageSize(records: readonly unknown[], limit: number, route: string): void {
  if (records.length > limit) {
    throw new ApiProtocolError(
      route,
      `the page holds ${records.length} records, more than the ${limit} asked for`,
    );
  }
}

/**
 * A page's `pagination.count` (spec 2.6: the number of records in this page) when it differs from
 * the records the page holds, or undefined (they agree, or no count was sent).
 *
 * A disagreement is reported, not fatal. The spec does not say how the count is reached, and a
 * platform that counts a page before it filters out what the feed does not show ("only public,
 * non-suppressed reviews", spec 2.1) sends a count above the records on every page holding a
 * hidden one; failing the walk there would fail it at that page on every run, for good (the
 * checkpoint stays before it, and no new review is polled again). The count guards nothing the
 * walk does not guard otherwise: the records that came are each validated (splitValid), and a
 * feed that loops or never ends is caught by the walk's own checks (a repeated cursor, a page
 * served twice, empty pages in a row, the page ceiling: see paginate). What it cannot tell from
 * a record the platform hid is a record lost on the way; but a body cut short or altered in
 * transit fails to parse as JSON long before, so such a loss needs a platform or proxy that drops
 * whole records and keeps the JSON valid. Were one to, a reconcile reading the page would mark
 * the missing records removed (as it does for hidden ones) and the next reconcile that reads them
 * would restore them; the log's warning names the route and both numbers.
 */
function countMismatchOf(records: readonly unknown[], pagination: Pagination): CountMismatch | undefined {
  const count = pagination.count;
  if (count === null || count === undefined || count === records.length) return undefined;
  return { count, records: records.length };
}

/**
 * A listing's page as a walk takes it, for every paginated resource: held to the `limit` asked
 * for, its count compared with its records (a difference is returned, not thrown: see
 * countMismatchOf), its continuation read, then its records validated one by one, the rejected
 * ones kept for the quarantine (splitValid).
 *
 * `records` is the answer's own array, taken: it is emptied once read. Left whole, the answers
 * of a walk survived two scavenges each and were promoted to old space, where only a full
 * collection frees them, although a heap snapshot mid-walk holds no more than two pages of them
 * (old garbage referring to young objects keeps them through a scavenge): 50 MB promoted over a
 * backfill of 100,000 reviews, its peak RSS 150 MB instead of 120 (docs/benchmarks.md, twenty-
 * second session). Emptied, the raw records are referred to by nothing once validated, and die
 * young; what the page keeps of them (valid records, rejected ones' raw) is its own.
 */
export function pageOf<T>(
  records: unknown[],
  pagination: Pagination,
  record: RecordSchema<T>,
  where: { readonly route: string; readonly field: string; readonly limit: number },
): Page<T> {
  const { route, field, limit } = where;
  checkPageSize(records, limit, route);
  const countMismatch = countMismatchOf(records, pagination);
  const nextCursor = continuationOf(pagination, route);
  const { valid, rejected } = splitValid(records, record, { route, status: 200, field }, limit);
  records.length = 0;
  const page: Page<T> = {
    items: valid,
    nextCursor,
    receivedAt: new Date(),
    rejected,
    ...(countMismatch === undefined ? {} : { countMismatch }),
    ...(nextCursor === null && hasCursor(pagination) ? { cursorIgnored: true } : {}),
  };
  return page;
}

/**
 * Empty pages in a row, each claiming more to come, that end a walk as a protocol violation. An
 * honest feed has no reason to send one, save a platform that filters a page after cutting it
 * (the feed hides suppressed reviews): 50 in a row is 50 full pages of hidden records, while a
 * platform that answers empty pages under fresh cursors for ever costs 50 requests, not the
 * million of the page ceiling. Empty pages do not trip the identical-page check, having no ends.
 */
const MAX_EMPTY_PAGES_IN_A_ROW = 50;

export interface PaginateOptions<T> {
  readonly signal?: AbortSignal | undefined;
  /** Route template named by protocol errors. */
  readonly route?: string;
  /** Pages one walk may follow; a runaway feed fails the walk past it. Default: unlimited. */
  readonly maxPages?: number;
  /** Identity of an item, to recognise a page served twice; without it, that check is off. */
  readonly idOf?: (item: T) => unknown;
  /** Where a protocol violation is logged before it is thrown, and a page's count mismatch. */
  readonly log?: Logger;
  /** Empty pages in a row claiming more that fail the walk. Default: MAX_EMPTY_PAGES_IN_A_ROW. */
  readonly maxEmptyPages?: number;
  /**
   * Whether the walk keeps its cursors in a checkpoint (PostgreSQL text): a next_cursor that text
   * cannot hold as sent then fails the walk (see uncheckpointable). Default: false.
   */
  readonly checkpointed?: boolean;
}

/**
 * Why `cursor` cannot be checkpointed, or undefined. Text cannot hold U+0000, and a lone surrogate
 * is written as U+FFFD: the cursor would be lost, or altered and then sent back as another one
 * (the platform might read it as another place in the feed). Nor can it be kept in another form:
 * `sync_state.cursor` is text, which holds every other string, so an escaped cursor could not be
 * told from one a checkpoint already holds as sent, not without a migration. The walk stops at
 * it, naming it, once the pages before it are written.
 */
function uncheckpointable(cursor: string, page: number): string | undefined {
  const reason = unstorableReason(cursor);
  if (reason === undefined) return undefined;
  // Escaped by JSON: the error's text is stored (sync_runs.error) and must not fail on it either.
  const shown = JSON.stringify(cursor.length > 100 ? `${cursor.slice(0, 100)}…` : cursor);
  return `next_cursor ${shown} of page ${page} ${reason} in the walk's checkpoint`;
}

/**
 * Walks pages from `startCursor` (null: the first page) to the end, fetching page N+1 while the
 * caller is still handling page N (a one-page lookahead: memory holds at most two pages).
 * Leaving the loop early aborts the lookahead; its failure then goes unobserved, on purpose.
 *
 * A feed that lies cannot make the walk loop for ever: a cursor already followed in this walk,
 * a page identical to the previous one (same first and last item, given `idOf`), `maxEmptyPages`
 * pages in a row without a record that each claim more, and a walk past `maxPages` each fail it
 * with an ApiProtocolError, thrown before the offending page is handed out. So does, when
 * `checkpointed`, a next_cursor that a checkpoint cannot hold.
 */
export async function* paginate<T>(
  fetchPage: FetchPage<T>,
  startCursor: string | null,
  options: PaginateOptions<T> = {},
): AsyncGenerator<Page<T>> {
  const { signal, route = 'the feed', maxPages = Number.POSITIVE_INFINITY, log } = options;
  const { idOf, maxEmptyPages = MAX_EMPTY_PAGES_IN_A_ROW, checkpointed = false } = options;
  const violation = (problem: string) => {
    const error = new ApiProtocolError(route, problem);
    log?.error({ route, err: error }, 'partner API pagination violated the protocol; walk stopped');
    return error;
  };
  const lookahead = new AbortController();
  const onAbort = () => lookahead.abort(signal?.reason);
  // A signal aborted already fires no 'abort': the walk would fetch on, unstopped.
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  const start = (cursor: string | null) => {
    const pending = fetchPage(cursor, lookahead.signal);
    pending.catch(() => {}); // observed when awaited; unobserved if the caller stops first
    return pending;
  };
  const followed = new Set<string>(startCursor === null ? [] : [startCursor]);
  let previousEnds: string | undefined;
  let emptyInARow = 0;
  try {
    let pending = start(startCursor);
    for (let pages = 1; ; pages++) {
      const page = await pending;
      if (page.countMismatch !== undefined) {
        const { count, records } = page.countMismatch;
        log?.warn(
          { route, page: pages, count, records },
          'partner API page count disagrees with its records',
        );
      }
      if (page.cursorIgnored) {
        log?.warn(
          { route, page: pages },
          'partner API page says has_more false but sends a next_cursor: taken as the end of the walk (spec 4.3)',
        );
      }
      const next = page.nextCursor;
      const unkept = checkpointed && next !== null ? uncheckpointable(next, pages) : undefined;
      if (unkept !== undefined) throw violation(unkept);
      if (next !== null && followed.has(next)) {
        throw violation(`next_cursor repeats a cursor already followed in this walk (page ${pages})`);
      }
      const ends =
        idOf === undefined || page.items.length === 0
          ? undefined
          : JSON.stringify([idOf(page.items[0]!), idOf(page.items.at(-1)!)]);
      if (ends !== undefined && ends === previousEnds) {
        throw violation(`page ${pages} is the same page as the one before it`);
      }
      previousEnds = ends;
      // Records rejected by their schema were sent all the same: such a page is not empty.
      const empty = page.items.length === 0 && (page.rejected?.length ?? 0) === 0;
      emptyInARow = empty && next !== null ? emptyInARow + 1 : 0;
      if (emptyInARow >= maxEmptyPages) {
        throw violation(`${emptyInARow} pages in a row held no record yet claimed more (page ${pages})`);
      }
      const beyondCeiling = next !== null && pages >= maxPages;
      if (next !== null && !beyondCeiling) {
        followed.add(next);
        pending = start(next);
      }
      yield page;
      if (beyondCeiling) throw violation(`the walk went past its ceiling of ${maxPages} pages`);
      if (next === null) return;
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    lookahead.abort();
  }
}
