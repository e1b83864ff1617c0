import type { Queryable, Tables } from '../db/queryable.js';
import { EMPTY_CHECKPOINT, type WalkCheckpoint } from './walkPlan.js';

/** The `sync_state` table: per job, the watermark and the checkpoint of an unfinished walk. */
export async function readCheckpoint(q: Queryable, db: Tables, job: string): Promise<WalkCheckpoint> {
  const row = await q(db.table('sync_state')).where({ job }).first();
  if (!row) return EMPTY_CHECKPOINT;
  return {
    watermark: row.watermark ?? null,
    cursor: row.cursor ?? null,
    walkSince: row.walk_since ?? null,
    walkNewest: row.walk_newest ?? null,
    walkStartedAt: row.walk_started_at ?? null,
  };
}

/** Writes the whole checkpoint of `job` (insert or update). Call it in the transaction of the data it covers. */
export async function writeCheckpoint(
  q: Queryable,
  db: Tables,
  job: string,
  state: WalkCheckpoint,
): Promise<void> {
  await q(db.table('sync_state'))
    .insert({
      job,
      watermark: state.watermark,
      cursor: state.cursor,
      walk_since: state.walkSince,
      walk_newest: state.walkNewest,
      walk_started_at: state.walkStartedAt,
      updated_at: q.fn.now(),
    })
    .onConflict('job')
    .merge();
}

/** Forgets `job`'s watermark and walk: its next run starts from the beginning of the feed. */
export async function deleteCheckpoint(q: Queryable, db: Tables, job: string): Promise<void> {
  await q(db.table('sync_state')).where({ job }).del();
}
