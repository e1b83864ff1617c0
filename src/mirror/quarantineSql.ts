import { createHash } from 'node:crypto';
import type { Queryable, Tables } from '../db/queryable.js';
import { storableJson, storableText } from '../db/storableText.js';
import type { RejectedRecord } from '../partner-api/validRecords.js';
import type { DirectoryTable } from './directorySql.js';

/** Where rejected records go: the review feed's quarantine, or the directory listings'. */
export type QuarantineTarget =
  | { readonly table: 'review_quarantine'; readonly source: 'feed' }
  | { readonly table: 'directory_quarantine'; readonly resource: DirectoryTable };

/**
 * The id a rejected record carries, as text, when it has one of a usable type. Storable, as it is
 * written and compared in SQL: an id holding U+0000 (one reason to reject a record) would
 * otherwise fail the statement, and with it the whole page of valid records beside it.
 */
export function rejectedRecordId(raw: unknown): string | null {
  const id = (raw as { id?: unknown } | null)?.id;
  return typeof id === 'string' || typeof id === 'number' ? storableText(String(id)) : null;
}

/** Stores rejected records (a sighting more for those already there); returns how many were new. */
export async function quarantineRecords(
  q: Queryable,
  db: Tables,
  records: readonly RejectedRecord[],
  target: QuarantineTarget,
): Promise<number> {
  if (records.length === 0) return 0;
  const rows = new Map<string, Record<string, unknown>>();
  for (const { raw, reason } of records) {
    // jsonb cannot hold U+0000 or half a character; the record stays readable, marked.
    const text = storableJson(raw);
    const hash = createHash('md5').update(text).digest('hex');
    const id = rejectedRecordId(raw);
    const common = { raw: text, raw_hash: hash, reason };
    rows.set(
      hash,
      target.table === 'review_quarantine'
        ? { ...common, review_id: id, source: target.source }
        : { ...common, record_id: id, resource: target.resource },
    );
  }
  const table = db.table(target.table);
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

export async function countQuarantined(
  q: Queryable,
  db: Tables,
  table: QuarantineTarget['table'],
): Promise<QuarantineCounts> {
  const [row] = await q(db.table(table)).select(
    q.raw('count(*) as records'),
    q.raw('max(last_seen_at) as last_seen_at'),
  );
  return { records: Number(row.records), last_seen_at: row.last_seen_at ?? null };
}
