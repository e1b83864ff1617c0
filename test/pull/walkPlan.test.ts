import { describe, expect, it } from 'vitest';
import {
  advanceWatermark,
  EMPTY_CHECKPOINT,
  newestCreatedAt,
  planFullWalk,
  planIncrementalWalk,
} from '../../src/pull/walkPlan.js';

const t = (iso: string) => new Date(iso);
const OVERLAP = 10 * 60_000;

describe('planIncrementalWalk', () => {
  it('reads the whole feed the first time', () => {
    expect(planIncrementalWalk(EMPTY_CHECKPOINT, OVERLAP)).toEqual({
      since: null,
      cursor: null,
      newest: null,
      resumed: false,
    });
  });

  it('starts a new walk the overlap behind the watermark', () => {
    const plan = planIncrementalWalk({ ...EMPTY_CHECKPOINT, watermark: t('2026-11-01T12:00:00Z') }, OVERLAP);
    expect(plan).toEqual({ since: t('2026-11-01T11:50:00Z'), cursor: null, newest: null, resumed: false });
  });

  it('resumes an unfinished walk with its own since, cursor and newest, whatever the watermark', () => {
    const state = {
      ...EMPTY_CHECKPOINT,
      watermark: t('2026-11-01T12:00:00Z'),
      cursor: 'c2',
      walkSince: t('2026-10-01T00:00:00Z'),
      walkNewest: t('2026-11-01T13:00:00Z'),
    };
    expect(planIncrementalWalk(state, OVERLAP)).toEqual({
      since: t('2026-10-01T00:00:00Z'),
      cursor: 'c2',
      newest: t('2026-11-01T13:00:00Z'),
      resumed: true,
    });
  });
});

describe('planFullWalk', () => {
  it('resumes only a walk that knows when it began', () => {
    const unfinished = { ...EMPTY_CHECKPOINT, cursor: 'c9', walkNewest: t('2026-11-01T00:00:00Z') };
    expect(planFullWalk(unfinished).resumed).toBe(false);
    const resumable = { ...unfinished, walkStartedAt: t('2026-11-02T00:00:00Z') };
    expect(planFullWalk(resumable)).toEqual({
      since: null,
      cursor: 'c9',
      newest: t('2026-11-01T00:00:00Z'),
      resumed: true,
    });
  });
});

describe('newestCreatedAt', () => {
  it('keeps the newest of what it had and a page', () => {
    const page = [{ created_at: '2026-11-01T10:00:00.000Z' }, { created_at: '2026-11-01T11:00:00.000Z' }];
    expect(newestCreatedAt(null, page)).toEqual(t('2026-11-01T11:00:00Z'));
    expect(newestCreatedAt(t('2026-11-02T00:00:00Z'), page)).toEqual(t('2026-11-02T00:00:00Z'));
    expect(newestCreatedAt(null, [])).toBeNull();
  });

  it('agrees with parsing every timestamp, whatever their offsets and fractions', () => {
    // A seeded generator: the same 2,000 pages on every run.
    let seed = 15;
    // mulberry32: an integer below n.
    const next = (n: number) => {
      seed = (seed + 0x6d2b79f5) | 0;
      let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
      return Math.floor((((x ^ (x >>> 14)) >>> 0) / 2 ** 32) * n);
    };
    const pad = (v: number, width = 2) => String(v).padStart(width, '0');
    const timestamp = () => {
      // Few distinct days and hours, so that pages often hold the same second in several forms.
      const base = `${2020 + next(3)}-${pad(1 + next(2))}-${pad(1 + next(2))}T${pad(next(3))}:00:${pad(next(2))}`;
      const fraction = ['', '.5', '.123', '.123456'][next(4)]!;
      const offset = next(3) === 0 ? `${next(2) ? '+' : '-'}${pad(next(16))}:${pad(next(60))}` : 'Z';
      return `${base}${fraction}${offset}`;
    };
    const reference = (current: Date | null, page: Array<{ created_at: string }>) => {
      const times = page.map((r) => Date.parse(r.created_at));
      const newest = Math.max(current?.getTime() ?? Number.NEGATIVE_INFINITY, ...times);
      return Number.isFinite(newest) ? new Date(newest) : null;
    };
    for (let i = 0; i < 2_000; i++) {
      const page = Array.from({ length: next(6) }, () => ({ created_at: timestamp() }));
      const current = next(2) ? null : new Date(Date.parse(timestamp()));
      expect(newestCreatedAt(current, page), JSON.stringify({ current, page })).toEqual(
        reference(current, page),
      );
    }
  });
});

describe('advanceWatermark', () => {
  const started = t('2026-11-22T06:00:00Z');

  it('moves to the newest review a completed walk saw, never backwards', () => {
    expect(advanceWatermark(null, t('2026-11-22T05:00:00Z'), started)).toEqual(t('2026-11-22T05:00:00Z'));
    expect(advanceWatermark(t('2026-11-22T05:00:00Z'), t('2026-11-22T04:00:00Z'), started)).toEqual(
      t('2026-11-22T05:00:00Z'),
    );
  });

  it('leaves the watermark alone after an empty walk', () => {
    expect(advanceWatermark(t('2026-11-22T05:00:00Z'), null, started)).toEqual(t('2026-11-22T05:00:00Z'));
    expect(advanceWatermark(null, null, started)).toBeNull();
  });

  it('never passes the time the walk started, whatever created_at the platform sent', () => {
    expect(advanceWatermark(null, t('2099-01-01T00:00:00Z'), started)).toEqual(started);
    expect(advanceWatermark(t('2026-11-22T05:00:00Z'), t('2099-01-01T00:00:00Z'), started)).toEqual(started);
  });
});
