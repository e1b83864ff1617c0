import { setTimeout as sleep } from 'node:timers/promises';
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

/** A write that hangs on every batch until released: a database whose commits all stall. */
function stalledWrite() {
  let release: () => void = () => {};
  const stalled = new Promise<void>((resolve) => {
    release = resolve;
  });
  const batches: number[][] = [];
  const write = async (items: readonly number[]) => {
    batches.push([...items]);
    await stalled;
    return items.map((n) => n * 2);
  };
  return { batches, write, release: () => release() };
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
    // Added halfway through the stalled write: time is left to write it once that is given up on.
    await sleep(25);
    const next = commits.add(3);
    await expect(late[0]).rejects.toThrow('late (2)');
    await expect(late[1]).rejects.toThrow('late (2)');
    expect(await next).toBe(6);
    await commits.idle();
    expect(timedOut).toEqual([2]);
    expect(batches).toEqual([[1, 2], [3]]);
    release(); // the stalled write ends later: its callers are already answered
  });

  it('counts the timeout from add(): an item queued behind two stalled writes fails within it', async () => {
    const { write, release } = stalledWrite();
    const commits = new GroupCommit(write, {
      overlapAfterMs: 5,
      timeout: { ms: 1_000, onTimeout: () => new Error('late') },
    });
    const late = (n: number) => commits.add(n).catch((error: Error) => error.message);
    const ahead = [late(1)];
    await sleep(20); // past overlapAfterMs: the next item's write starts beside the first
    ahead.push(late(2));
    await sleep(20);
    const addedMs = performance.now();
    // Both writes in flight: it waits until the first is given up on, but not a timeout more.
    await expect(commits.add(3)).rejects.toThrow('late');
    // Counted from its write instead, it failed after about two timeouts (one, then its own).
    expect(performance.now() - addedMs).toBeLessThan(1_500);
    expect(await Promise.all(ahead)).toEqual(['late', 'late']);
    release();
  });

  it('fails the items whose time ran out while they queued, without writing them', async () => {
    const { batches, write, release } = stalledWrite();
    const commits = new GroupCommit(write, {
      maxBatch: 1,
      timeout: { ms: 500, onTimeout: () => new Error('late') },
    });
    const addedMs = performance.now();
    const settled = await Promise.allSettled([1, 2, 3, 4].map((n) => commits.add(n)));
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
    // Not one timeout per batch ahead of it (four of them, 2 s): every item within its own.
    expect(performance.now() - addedMs).toBeLessThan(1_250);
    // The stalled database was not sent the writes nobody waited for any more.
    expect(batches.length).toBeLessThan(4);
    release();
    await commits.idle();
  });

  describe('overlapAfterMs', () => {
    /** A write that hangs on any batch holding 1 until released, and records how many ran at once. */
    function stallingWrite() {
      let release: () => void = () => {};
      const stalled = new Promise<void>((resolve) => {
        release = resolve;
      });
      const batches: number[][] = [];
      let running = 0;
      let mostAtOnce = 0;
      const write = async (items: readonly number[]) => {
        batches.push([...items]);
        mostAtOnce = Math.max(mostAtOnce, ++running);
        try {
          if (items.includes(1)) await stalled;
          else await new Promise((resolve) => setTimeout(resolve, 2));
          return items.map((n) => n * 2);
        } finally {
          running--;
        }
      };
      return { batches, write, release: () => release(), mostAtOnce: () => mostAtOnce };
    }

    it('items behind a stalled write are written beside it, not after it, at most two writes at once', async () => {
      const { batches, write, release, mostAtOnce } = stallingWrite();
      const commits = new GroupCommit(write, { overlapAfterMs: 20 });
      const stalled = commits.add(1);
      await new Promise((resolve) => setImmediate(resolve));
      const behind = [commits.add(2), commits.add(3)];
      // Written while the first write still hangs: their callers need not wait for it.
      expect(await Promise.all(behind)).toEqual([4, 6]);
      // A second stalled write: the first two are in flight, so the next item waits for one of them.
      const stalledToo = commits.add(1);
      await sleep(50); // past overlapAfterMs: it is in flight beside the first
      const third = commits.add(4);
      let thirdWritten = false;
      void third.then(() => (thirdWritten = true));
      await sleep(60);
      expect(thirdWritten).toBe(false);
      release();
      expect(await Promise.all([stalled, stalledToo, third])).toEqual([2, 2, 8]);
      await commits.idle();
      expect(batches).toEqual([[1], [2, 3], [1], [4]]);
      expect(mostAtOnce()).toBe(2);
    });

    it('writes that end sooner than overlapAfterMs never overlap, and batch as without it', async () => {
      const { batches, write, mostAtOnce } = stallingWrite();
      const commits = new GroupCommit(write, { overlapAfterMs: 50 });
      const first = [2, 3, 4].map((n) => commits.add(n));
      await new Promise((resolve) => setImmediate(resolve));
      const second = [5, 6].map((n) => commits.add(n));
      expect(await Promise.all([...first, ...second])).toEqual([4, 6, 8, 10, 12]);
      expect(batches).toEqual([
        [2, 3, 4],
        [5, 6],
      ]);
      expect(mostAtOnce()).toBe(1);
    });

    it('without overlapAfterMs, the items behind a stalled write wait for it', async () => {
      const { batches, write, release } = stallingWrite();
      const commits = new GroupCommit(write);
      const stalled = commits.add(1);
      await new Promise((resolve) => setImmediate(resolve));
      let behindWritten = false;
      const behind = commits.add(2).then((r) => {
        behindWritten = true;
        return r;
      });
      await sleep(50);
      expect(behindWritten).toBe(false);
      release();
      expect(await Promise.all([stalled, behind])).toEqual([2, 4]);
      expect(batches).toEqual([[1], [2]]);
    });
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
