import { describe, expect, it } from 'vitest';
import { FatalError } from '../../src/errors.js';
import type { Logger } from '../../src/log.js';
import { ApiProtocolError } from '../../src/partner-api/errors.js';
import { formatPath, platformErrorText } from '../../src/partner-api/http.js';
import {
  continuationOf,
  type FetchPage,
  type Page,
  type PaginateOptions,
  paginate,
} from '../../src/partner-api/paginate.js';

/** An in-memory feed of `n` items in pages of `size`; the cursor is the next index. */
function feed(n: number, size: number) {
  const log: string[] = [];
  const fetchPage = async (cursor: string | null): Promise<Page<number>> => {
    const start = cursor === null ? 0 : Number(cursor);
    log.push(`fetch ${start}`);
    await new Promise((r) => setImmediate(r));
    const items = Array.from({ length: Math.max(0, Math.min(size, n - start)) }, (_, i) => start + i);
    const next = start + size < n ? String(start + size) : null;
    return { items, nextCursor: next, receivedAt: new Date() };
  };
  return { log, fetchPage };
}

describe('continuationOf', () => {
  it('follows next_cursor only while has_more', () => {
    expect(continuationOf({ count: 1, has_more: true, next_cursor: 'c' }, 'GET /reviews')).toBe('c');
    expect(continuationOf({ count: 1, has_more: false, next_cursor: 'c' }, 'GET /reviews')).toBeNull();
    expect(continuationOf({ count: 0, has_more: false, next_cursor: null }, 'GET /reviews')).toBeNull();
  });

  it('refuses more pages without a cursor: a protocol violation, never the end of the feed', () => {
    const lie = () => continuationOf({ count: 1, has_more: true, next_cursor: null }, 'GET /reviews');
    expect(lie).toThrow(ApiProtocolError);
    expect(lie).toThrow(FatalError);
    expect(lie).toThrow(
      'GET /reviews broke the pagination protocol: has_more is true but next_cursor is null',
    );
  });
});

/** A fetcher serving fixed pages by cursor (null: the first), recording what it was asked. */
function scripted(pages: Record<string, { items: number[]; next: string | null }>) {
  const asked: (string | null)[] = [];
  const fetchPage = async (cursor: string | null): Promise<Page<number>> => {
    asked.push(cursor);
    const page = pages[cursor ?? 'first'];
    if (page === undefined) throw new Error(`no page for ${cursor}`);
    return { items: page.items, nextCursor: page.next, receivedAt: new Date() };
  };
  return { asked, fetchPage };
}

async function walk(fetchPage: FetchPage<number>, options: PaginateOptions<number> = {}) {
  const seen: number[][] = [];
  const error = await (async () => {
    for await (const page of paginate(fetchPage, null, { route: 'GET /reviews', ...options }))
      seen.push(page.items);
  })().catch((e: unknown) => e);
  return { seen, error };
}

describe('paginate against a feed that lies', () => {
  it('stops at a cursor it already followed, before handing out the page that leads back', async () => {
    const { asked, fetchPage } = scripted({
      first: { items: [1, 2], next: 'a' },
      a: { items: [3, 4], next: 'b' },
      b: { items: [5, 6], next: 'a' },
    });
    const { seen, error } = await walk(fetchPage);
    expect(error).toBeInstanceOf(ApiProtocolError);
    expect((error as Error).message).toBe(
      'GET /reviews broke the pagination protocol: next_cursor repeats a cursor already followed in this walk (page 3)',
    );
    expect(seen).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(asked).toEqual([null, 'a', 'b']);
  });

  it('stops at a cursor that points at itself, and at the start cursor coming back', async () => {
    const self = scripted({ first: { items: [1], next: 'x' }, x: { items: [2], next: 'x' } });
    expect((await walk(self.fetchPage)).error).toBeInstanceOf(ApiProtocolError);
    const back = scripted({ s: { items: [1], next: 't' }, t: { items: [2], next: 's' } });
    const seen: number[][] = [];
    await expect(async () => {
      for await (const page of paginate(back.fetchPage, 's')) seen.push(page.items);
    }).rejects.toThrow(/next_cursor repeats a cursor already followed/);
    expect(seen).toEqual([[1]]);
  });

  it('stops at a page identical to the one before it, even under a fresh cursor', async () => {
    let n = 0;
    const fetchPage = async (): Promise<Page<number>> => ({
      items: [7, 8, 9],
      nextCursor: `fresh-${n++}`,
      receivedAt: new Date(),
    });
    const { seen, error } = await walk(fetchPage, { idOf: (n) => n });
    expect((error as Error).message).toBe(
      'GET /reviews broke the pagination protocol: page 2 is the same page as the one before it',
    );
    expect(seen).toEqual([[7, 8, 9]]);
  });

  it('stops at the 50th empty page in a row that claims more, each under a fresh cursor', async () => {
    let n = 0;
    const fetchPage = async (): Promise<Page<number>> => {
      n++;
      return { items: n === 1 ? [1] : [], nextCursor: `fresh-${n}`, receivedAt: new Date() };
    };
    const { seen, error } = await walk(fetchPage, { idOf: (i) => i, maxPages: 1_000_000 });
    expect((error as Error).message).toBe(
      'GET /reviews broke the pagination protocol: 50 pages in a row held no record yet claimed more (page 51)',
    );
    expect(seen).toHaveLength(50); // the first page and 49 empty ones: the 50th is not handed out
    expect(n).toBe(51);
  });

  it('counts empty pages only in a row, and not a page whose records were all rejected', async () => {
    let n = 0;
    const fetchPage = async (): Promise<Page<number>> => {
      n++;
      const rejected = n % 40 === 0 ? [{ raw: {}, reason: 'rating: expected number' }] : undefined;
      // Every 40th page is wholly rejected, every 45th holds a record; the rest are empty.
      const items = n % 45 === 0 ? [n] : [];
      return { items, nextCursor: n < 200 ? `c${n}` : null, receivedAt: new Date(), rejected };
    };
    const { seen, error } = await walk(fetchPage, { maxEmptyPages: 50 });
    expect(error).toBeUndefined();
    expect(seen).toHaveLength(200);
  });

  it('lets the last page be empty, and an empty feed end at once', async () => {
    const { fetchPage } = scripted({ first: { items: [1], next: 'a' }, a: { items: [], next: null } });
    expect(await walk(fetchPage, { maxEmptyPages: 1 })).toEqual({ seen: [[1], []], error: undefined });
    const empty = scripted({ first: { items: [], next: null } });
    expect(await walk(empty.fetchPage, { maxEmptyPages: 1 })).toEqual({ seen: [[]], error: undefined });
  });

  it('fails a walk past its page ceiling, after the pages within it, and logs why', async () => {
    let n = 0;
    const fetchPage = async (): Promise<Page<number>> => {
      n++;
      return { items: [n], nextCursor: `c${n}`, receivedAt: new Date() };
    };
    const logged: string[] = [];
    const log = { error: (_: unknown, msg: string) => logged.push(msg) } as unknown as Logger;
    const { seen, error } = await walk(fetchPage, { maxPages: 5, log });
    expect((error as Error).message).toBe(
      'GET /reviews broke the pagination protocol: the walk went past its ceiling of 5 pages',
    );
    expect(seen).toEqual([[1], [2], [3], [4], [5]]);
    expect(n).toBe(5); // no request beyond the ceiling
    expect(logged).toEqual(['partner API pagination violated the protocol; walk stopped']);
  });

  it('ends at has_more false even beside a cursor (spec rule 2), and walks exactly to the ceiling', async () => {
    const { fetchPage } = scripted({ first: { items: [1], next: 'a' }, a: { items: [2], next: null } });
    expect(await walk(fetchPage, { maxPages: 2 })).toEqual({ seen: [[1], [2]], error: undefined });
  });
});

describe('paginate', () => {
  it('yields every page in order, starting at the given cursor', async () => {
    const { fetchPage } = feed(7, 3);
    const all: number[] = [];
    for await (const page of paginate(fetchPage, null)) all.push(...page.items);
    expect(all).toEqual([0, 1, 2, 3, 4, 5, 6]);
    const rest: number[] = [];
    for await (const page of paginate(fetchPage, '3')) rest.push(...page.items);
    expect(rest).toEqual([3, 4, 5, 6]);
  });

  it('fetches the next page while the caller still handles the current one', async () => {
    const { log, fetchPage } = feed(9, 3);
    for await (const page of paginate(fetchPage, null)) {
      await new Promise((r) => setTimeout(r, 5));
      log.push(`handled ${page.items[0]}`);
    }
    expect(log).toEqual(['fetch 0', 'fetch 3', 'handled 0', 'fetch 6', 'handled 3', 'handled 6']);
  });

  it('aborts the lookahead when the caller stops early, and surfaces a fetch failure', async () => {
    let aborted = false;
    const fetchPage = async (cursor: string | null, signal: AbortSignal): Promise<Page<number>> => {
      signal.addEventListener('abort', () => {
        aborted = true;
      });
      if (cursor === 'boom') throw new Error('boom');
      return { items: [1], nextCursor: cursor === null ? 'next' : 'boom', receivedAt: new Date() };
    };
    for await (const _ of paginate(fetchPage, null)) break;
    expect(aborted).toBe(true);
    const seen: number[] = [];
    await expect(async () => {
      for await (const page of paginate(fetchPage, null)) seen.push(...page.items);
    }).rejects.toThrow('boom');
    expect(seen).toEqual([1, 1]);
  });

  it('hands a signal aborted before the walk began on to its fetches, aborted', async () => {
    const stopped = new AbortController();
    stopped.abort(new Error('shutting down'));
    const signals: boolean[] = [];
    const fetchPage = async (_: string | null, signal: AbortSignal): Promise<Page<number>> => {
      signals.push(signal.aborted);
      signal.throwIfAborted();
      return { items: [1], nextCursor: 'more', receivedAt: new Date() };
    };
    await expect(async () => {
      for await (const _ of paginate(fetchPage, null, { signal: stopped.signal })) {
        // nothing
      }
    }).rejects.toThrow('shutting down');
    expect(signals).toEqual([true]);
  });
});

describe('error text helpers', () => {
  it('formats zod paths like code', () => {
    expect(formatPath(['reviews', 3, 'rating'])).toBe('reviews[3].rating');
    expect(formatPath([])).toBe('(body)');
  });
  it("surfaces the platform's error field whatever its shape", () => {
    expect(platformErrorText('{"error":"slug already taken"}')).toBe('slug already taken');
    expect(platformErrorText('{"error":{"name":["is required"]}}')).toBe('{"name":["is required"]}');
    expect(platformErrorText('<html>\n Not Found </html>')).toBe('<html> Not Found </html>');
    expect(platformErrorText('')).toBe('(no error text)');
    // Stored as the error text of what was sent: bounded, and never text PostgreSQL refuses.
    expect(platformErrorText(JSON.stringify({ error: `bad\u0000${'x'.repeat(1_000)}` }))).toBe(
      `bad\uFFFD${'x'.repeat(296)}`,
    );
    expect(platformErrorText('oops\u0000')).toBe('oops\uFFFD');
  });
});
