import type { Queryable, Tables } from '../../db/queryable.js';
import type { ContactRow } from './contactRow.js';
import type { StoredContact } from './planPush.js';

/** What the mirror knows of these keys (absent: never pushed). */
export async function readStoredContacts(
  q: Queryable,
  db: Tables,
  keys: readonly string[],
): Promise<Map<string, StoredContact>> {
  const rows: Array<{ key: string; content_hash: string; outcome: string }> = await q(db.table('contacts'))
    .whereIn('key', keys)
    .select('key', 'content_hash', 'outcome');
  return new Map(rows.map((r) => [r.key, { hash: r.content_hash, sent: r.outcome === 'sent' }]));
}

/** Before sending: the row as it is about to be sent, marked pending (a crash leaves it so, and it is sent again). */
export async function recordPending(q: Queryable, db: Tables, row: ContactRow): Promise<void> {
  await q(db.table('contacts'))
    .insert({ key: row.key, ...row.contact, content_hash: row.hash, outcome: 'pending', last_error: null })
    .onConflict('key')
    .merge([
      'email',
      'name',
      'external_id',
      'professional_id',
      'content_hash',
      'outcome',
      'last_error',
      'pushed_at',
    ]);
}

/** After sending: how it went. */
export async function recordOutcome(
  q: Queryable,
  db: Tables,
  key: string,
  outcome: { sent: true; platformContactId: string | null } | { sent: false; error: string },
): Promise<void> {
  await q(db.table('contacts'))
    .where({ key })
    .update(
      outcome.sent
        ? {
            outcome: 'sent',
            platform_contact_id: outcome.platformContactId,
            last_error: null,
            pushed_at: q.fn.now(),
          }
        : { outcome: 'failed', last_error: outcome.error, pushed_at: q.fn.now() },
    );
}

export interface PushLogEntry {
  readonly line: number | null;
  readonly key: string | null;
  readonly operation: string;
  readonly outcome: string;
  readonly error?: string | null;
  readonly contentHash?: string | null;
}

export async function appendPushLog(
  q: Queryable,
  db: Tables,
  run: { runId: number | undefined; file: string },
  entries: readonly PushLogEntry[],
): Promise<void> {
  if (entries.length === 0) return;
  await q(db.table('contact_push_log')).insert(
    entries.map((e) => ({
      run_id: run.runId ?? null,
      file: run.file,
      line: e.line,
      key: e.key,
      operation: e.operation,
      outcome: e.outcome,
      error: e.error ?? null,
      content_hash: e.contentHash ?? null,
    })),
  );
}

/** Keeps the row log from growing without bound. */
export async function prunePushLog(q: Queryable, db: Tables, retentionDays: number): Promise<number> {
  return q(db.table('contact_push_log'))
    .where('at', '<', q.raw(`now() - make_interval(days => ?)`, [retentionDays]))
    .del();
}
