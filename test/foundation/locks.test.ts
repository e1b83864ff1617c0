import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { freshDb } from '../helpers/db.js';

describe('cluster-wide locks', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb({ migrate: false });
  });
  afterAll(async () => db?.close());

  it('make a second holder skip (try) or queue (wait) while the first holds the lock', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let entered!: () => void;
    const inside = new Promise<void>((r) => {
      entered = r;
    });
    const first = db.withLock('test:lock', async () => {
      entered();
      await held;
      return 'first';
    });
    await inside;
    const order: string[] = [];
    const attempt = await db.tryWithLock('test:lock', async () => 'second');
    const queued = db.withLock('test:lock', async () => order.push('queued'));
    const other = await db.tryWithLock('test:other-lock', async () => 'other');
    order.push('released');
    release();
    expect(await first).toBe('first');
    await queued;
    if (db.backend === 'postgres') {
      expect(attempt).toEqual({ acquired: false });
      expect(order).toEqual(['released', 'queued']);
    } else {
      // The embedded database belongs to one process (the data directory lock): nothing to exclude.
      expect(attempt).toEqual({ acquired: true, value: 'second' });
    }
    expect(other).toEqual({ acquired: true, value: 'other' });
    expect(await db.tryWithLock('test:lock', async () => 'after')).toEqual({
      acquired: true,
      value: 'after',
    });
  });
});
