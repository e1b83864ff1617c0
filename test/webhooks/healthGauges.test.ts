import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MirrorGauges } from '../../src/admin/mirrorGauges.js';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { makeMetrics } from '../../src/metrics.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';

/**
 * The webhook gauges as every replica reads them from the health runs in `sync_runs`, whichever
 * process recorded them: here rows written directly, with the times chosen.
 */
describe('webhook gauges read from the last successful health run', () => {
  let db: Db;
  const metrics = makeMetrics();
  let gauges: MirrorGauges;
  beforeAll(async () => {
    db = await freshDb();
    gauges = new MirrorGauges({ db, log: quietLog, metrics });
  });
  afterAll(async () => {
    await db?.close();
  });

  const recordRun = async (finishedAt: string, counts: RunCounts, outcome = 'success') => {
    const [row] = await db
      .knex(db.table('sync_runs'))
      .insert({
        job: JOB.webhookHealth,
        started_at: new Date(new Date(finishedAt).getTime() - 1_000),
        finished_at: new Date(finishedAt),
        outcome,
        counts: JSON.stringify(counts),
      })
      .returning('id');
    return Number(row.id);
  };
  const read = async () => {
    expect(await gauges.refresh()).toBe(true);
    const states = Object.fromEntries(
      (await metrics.webhooks.get()).values.map((v) => [String(v.labels.state), v.value]),
    );
    const ratio = (await metrics.webhookMissRatio.get()).values[0]?.value;
    return { states, ratio };
  };
  const seen = (failing: number, feed: number, webhook: number): RunCounts => ({
    listed: 1 + failing,
    active: 1,
    inactive: 0,
    failing,
    first_seen_by_feed: feed,
    first_seen_by_webhook: webhook,
  });

  it('sets every state and the ratio from the last successful run; a failed run counts for nothing', async () => {
    await recordRun('2030-01-01T11:00:00Z', seen(1, 3, 1));
    await recordRun('2030-01-01T11:05:00Z', seen(0, 0, 0), 'failed');
    expect(await read()).toEqual({ states: { active: 1, inactive: 0, failing: 1 }, ratio: 0.75 });
  });

  it('reads a ratio of 0 when a run saw no review first seen in the window, whatever this replica held', async () => {
    await recordRun('2030-01-01T12:00:00Z', seen(0, 0, 0));
    expect(await read()).toEqual({ states: { active: 1, inactive: 0, failing: 0 }, ratio: 0 });
  });

  it('follows the newest run the database has, also an older one after the newest is gone', async () => {
    const newest = await recordRun('2030-01-01T13:00:00Z', seen(2, 1, 1));
    expect(await read()).toEqual({ states: { active: 1, inactive: 0, failing: 2 }, ratio: 0.5 });
    // As after a failover to a standby that lacks it: the database is the truth.
    await db.knex(db.table('sync_runs')).where({ id: newest }).delete();
    expect(await read()).toEqual({ states: { active: 1, inactive: 0, failing: 0 }, ratio: 0 });
  });

  it('exports no webhook gauge while the newest run was recorded by an older version, which exports its own', async () => {
    await recordRun('2030-01-01T14:00:00Z', seen(1, 1, 0));
    expect(await read()).toEqual({ states: { active: 1, inactive: 0, failing: 1 }, ratio: 1 });
    // A rolling upgrade: an older replica checked last and recorded only what it listed.
    await recordRun('2030-01-01T14:05:00Z', { listed: 1 });
    expect(await read()).toEqual({ states: {}, ratio: undefined });
    // This version checks again: its values are back.
    await recordRun('2030-01-01T14:10:00Z', seen(0, 1, 1));
    expect(await read()).toEqual({ states: { active: 1, inactive: 0, failing: 0 }, ratio: 0.5 });
  });
});
