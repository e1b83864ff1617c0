import type { Db } from '../db/connect.js';
import { type OutboxStats, readOutboxStats } from '../push/events/outboxSql.js';
import { hasTables } from './statusSql.js';

/** Null while the outbox does not exist yet (migrations pending). */
export async function readOutboxStatus(db: Db): Promise<OutboxStats | null> {
  if (!(await hasTables(db.knex, db, ['events_outbox']))) return null;
  return readOutboxStats(db.knex, db);
}

export function formatOutboxStatus(stats: OutboxStats | null | undefined): string[] {
  if (!stats) return [];
  const n = (state: string) => stats.byState[state] ?? 0;
  const lines = [
    'events outbox:',
    `  backlog        ${stats.backlog} (pending ${n('pending')}, being sent ${n('sending')}; oldest pending ${Math.round(stats.oldestPendingSeconds)} s)`,
    `  done           sent ${n('sent')}, failed ${n('failed')}, parked ${n('parked')} (possible duplicates ${stats.possibleDuplicates}; table events_outbox)`,
  ];
  if (n('parked') > 0)
    lines.push('  parked events wait for `review-mirror events retry KEY` or `events discard KEY`');
  return lines;
}
