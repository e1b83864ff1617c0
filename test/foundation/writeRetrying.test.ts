import { describe, expect, it } from 'vitest';
import { writeRetrying } from '../../src/db/writeRetrying.js';

const failure = (code: string) => Object.assign(new Error(`failed (${code})`), { code });

/** A write failing with each of `codes` in turn, then writing; and the tries it was asked for. */
function writeFailing(...codes: string[]) {
  let tries = 0;
  return {
    write: async () => {
      tries++;
      const code = codes.shift();
      if (code !== undefined) throw failure(code);
      return 'written';
    },
    tries: () => tries,
  };
}

describe('writeRetrying', () => {
  const quick = { random: () => 0, onRetry: () => {} };

  it('tries again while the database is unreachable, telling each retry', async () => {
    const { write, tries } = writeFailing('57P01', 'ECONNREFUSED');
    const retries: number[] = [];
    const written = await writeRetrying(write, {
      ...quick,
      budgetMs: 10_000,
      onRetry: (_error, n) => retries.push(n),
    });
    expect({ written, tries: tries(), retries }).toEqual({ written: 'written', tries: 3, retries: [1, 2] });
  });

  it('throws a data error at once: the same values fail every try', async () => {
    const { write, tries } = writeFailing('23505');
    await expect(writeRetrying(write, { ...quick, budgetMs: 10_000 })).rejects.toMatchObject({
      code: '23505',
    });
    expect(tries()).toBe(1);
  });

  it('throws the last failure once stopped, or past its budget', async () => {
    const stopped = writeFailing('57P01', '57P01');
    const stop = AbortSignal.abort();
    await expect(writeRetrying(stopped.write, { ...quick, budgetMs: 10_000, stop })).rejects.toMatchObject({
      code: '57P01',
    });
    expect(stopped.tries()).toBe(1);

    const outlasting = writeFailing(...Array<string>(1_000).fill('57P01'));
    await expect(
      writeRetrying(outlasting.write, { random: () => 1, onRetry: () => {}, budgetMs: 300 }),
    ).rejects.toMatchObject({ code: '57P01' });
    // Waits of 100 and 200 ms fit in the budget, the next (400) would not.
    expect(outlasting.tries()).toBeGreaterThanOrEqual(2);
    expect(outlasting.tries()).toBeLessThanOrEqual(3);
  });
});
