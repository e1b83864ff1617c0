import { describe, expect, it } from 'vitest';
import { formatPath, platformErrorText } from '../../src/partner-api/client.js';
import { continuationOf, type Page, paginate } from '../../src/partner-api/paginate.js';

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
    expect(continuationOf({ count: 1, has_more: true, next_cursor: 'c' })).toBe('c');
    expect(continuationOf({ count: 1, has_more: false, next_cursor: 'c' })).toBeNull();
    expect(continuationOf({ count: 1, has_more: true, next_cursor: null })).toBeNull();
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
  });
});
