import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../../src/db/groupCommit.js';

class Refused extends Error {}

/** A write that records each batch it was given and answers each item doubled. */
function recordingWrite(options: { refuse?: number } = {}) {
  const batches: number[][] = [];
  const write = async (items: readonly number[]) => {
    batches.push([...items]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    if (options.refuse !== undefined && items.includes(options.refuse)) throw new Refused('refused');
    return items.map((n) => n * 2);
  };
  return { batches, write };
}

describe('GroupCommit', () => {
  it('writes what arrives in one turn together, what arrives during a write in the next, each caller its own result', async () => {
    const { batches, write } = recordingWrite();
    const commits = new GroupCommit(write);
    const first = [1, 2, 3].map((n) => commits.add(n));
    await new Promise((resolve) => setImmediate(resolve)); // the first write has started
    const second = [4, 5].map((n) => commits.add(n));
    expect(await Promise.all([...first, ...second])).toEqual([2, 4, 6, 8, 10]);
    expect(batches).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
  });

  it('writes at most maxBatch items at once', async () => {
    const { batches, write } = recordingWrite();
    const commits = new GroupCommit(write, { maxBatch: 2 });
    await Promise.all([1, 2, 3, 4, 5].map((n) => commits.add(n)));
    expect(batches).toEqual([[1, 2], [3, 4], [5]]);
  });

  it('isolates the item the database refuses: it fails alone, the others are written', async () => {
    const { batches, write } = recordingWrite({ refuse: 3 });
    const failures: number[] = [];
    const commits = new GroupCommit(write, {
      isolateWhen: (e) => e instanceof Refused,
      onFailure: (_error, size) => failures.push(size),
    });
    const settled = await Promise.allSettled([1, 2, 3, 4, 5].map((n) => commits.add(n)));
    expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : 'refused'))).toEqual([
      2,
      4,
      'refused',
      8,
      10,
    ]);
    expect(batches).toEqual([[1, 2, 3, 4, 5], [1, 2, 3], [1, 2], [3], [4, 5]]);
    // Only the item at fault failed for good: the split batches were not failures.
    expect(failures).toEqual([1]);
  });

  it('without isolateWhen, a failed write fails every item in it', async () => {
    const { write } = recordingWrite({ refuse: 3 });
    const commits = new GroupCommit(write);
    const settled = await Promise.allSettled([1, 2, 3].map((n) => commits.add(n)));
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
  });

  it('a write past the timeout fails its callers with the given error, and the next batch goes ahead', async () => {
    let release: () => void = () => {};
    const stalled = new Promise<void>((resolve) => {
      release = resolve;
    });
    const batches: number[][] = [];
    const timedOut: number[] = [];
    const commits = new GroupCommit(
      async (items: readonly number[]) => {
        batches.push([...items]);
        if (items.includes(1)) await stalled; // a connection that hangs
        return items.map((n) => n * 2);
      },
      {
        timeout: {
          ms: 50,
          onTimeout: (size) => {
            timedOut.push(size);
            return new Error(`late (${size})`);
          },
        },
      },
    );
    const late = [commits.add(1), commits.add(2)];
    await new Promise((resolve) => setImmediate(resolve));
    const next = commits.add(3);
    await expect(late[0]).rejects.toThrow('late (2)');
    await expect(late[1]).rejects.toThrow('late (2)');
    expect(await next).toBe(6);
    await commits.idle();
    expect(timedOut).toEqual([2]);
    expect(batches).toEqual([[1, 2], [3]]);
    release(); // the stalled write ends later: its callers are already answered
  });

  it('idle() waits for every item added so far', async () => {
    const { write } = recordingWrite();
    const commits = new GroupCommit(write);
    const written: number[] = [];
    for (const n of [1, 2, 3]) void commits.add(n).then((r) => written.push(r));
    await commits.idle();
    expect(written).toEqual([2, 4, 6]);
  });
});
