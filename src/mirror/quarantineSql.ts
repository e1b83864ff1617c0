import { createHash } from 'node:crypto';
import type { Queryable, Tables } from '../db/queryable.js';
import type { RejectedRecord } from '../partner-api/validRecords.js';

/** Stores rejected records (a sighting more for those already there); returns how many were new. */
export async function quarantineRecords(
  q: Queryable,
  db: Tables,
  records: readonly RejectedRecord[],
  source: 'feed',
): Promise<number> {
  if (records.length === 0) return 0;
  const rows = new Map<string, Record<string, unknown>>();
  for (const { raw, reason } of records) {
    // PostgreSQL's jsonb cannot hold U+0000 either; the record stays readable, marked.
    const text = JSON.stringify(raw ?? null).replaceAll('\\u0000', '\\ufffd');
    const hash = createHash('md5').update(text).digest('hex');
    const id = (raw as { id?: unknown } | null)?.id;
    rows.set(hash, {
      review_id: typeof id === 'string' || typeof id === 'number' ? String(id) : null,
      raw: text,
      raw_hash: hash,
      reason,
      source,
    });
  }
  const table = db.table('review_quarantine');
  const result = (await q(table)
    .insert([...rows.values()])
    .onConflict('raw_hash')
    .merge({
      reason: q.raw('excluded.reason'),
      last_seen_at: q.fn.now(),
      seen_count: q.raw('??.seen_count + 1', [table]),
    })
    .returning(q.raw('(xmax = 0) as inserted'))) as Array<{ inserted: boolean }>;
  return result.filter((r) => r.inserted).length;
}

export interface QuarantineCounts {
  records: number;
  last_seen_at: Date | null;
}

export async function countQuarantined(q: Queryable, db: Tables): Promise<QuarantineCounts> {
  const [row] = await q(db.table('review_quarantine')).select(
    q.raw('count(*) as records'),
    q.raw('max(last_seen_at) as last_seen_at'),
  );
  return { records: Number(row.records), last_seen_at: row.last_seen_at ?? null };
}
