import type { Queryable, Tables } from '../../db/queryable.js';
import type { ContactRow } from './contactRow.js';
import type { StoredContact } from './planPush.js';

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

/**
 * Stages the last row of each key of one batch (keys unique within it) and returns, for keys an
 * earlier batch of the same push had staged, the line each new row replaces.
 */
export async function stageContactRows(
  q: Queryable,
  db: Tables,
  pushId: string,
  rows: readonly ContactRow[],
): Promise<Map<string, number>> {
  if (rows.length === 0) return new Map();
  return q.transaction(async (trx) => {
    const earlier: Array<{ key: string; line: number }> = await trx(db.table('contact_push_staging'))
      .where({ push_id: pushId })
      .whereIn(
        'key',
        rows.map((r) => r.key),
      )
      .select('key', 'line');
    await trx(db.table('contact_push_staging'))
      .insert(
        rows.map((r) => ({
          push_id: pushId,
          key: r.key,
          line: r.line,
          ...r.contact,
          content_hash: r.hash,
        })),
      )
      .onConflict(['push_id', 'key'])
      .merge(['line', 'email', 'name', 'external_id', 'professional_id', 'content_hash']);
    return new Map(earlier.map((e) => [e.key, e.line]));
  });
}

/** A staged row with what the mirror knows of its key from an earlier push. */
export interface StagedContact {
  readonly row: ContactRow;
  readonly stored: StoredContact | undefined;
}

/** The next staged rows of a push after a line, in file order, each with its stored contact. */
export async function readStagedContacts(
  q: Queryable,
  db: Tables,
  pushId: string,
  afterLine: number,
  limit: number,
): Promise<StagedContact[]> {
  const rows: Array<{
    key: string;
    line: number;
    email: string;
    name: string | null;
    external_id: string | null;
    professional_id: string | null;
    content_hash: string;
    stored_hash: string | null;
    stored_outcome: string | null;
  }> = await q({ s: db.table('contact_push_staging') })
    .leftJoin({ c: db.table('contacts') }, 'c.key', 's.key')
    .where('s.push_id', pushId)
    .andWhere('s.line', '>', afterLine)
    .orderBy('s.line')
    .limit(limit)
    .select(
      's.key',
      's.line',
      's.email',
      's.name',
      's.external_id',
      's.professional_id',
      's.content_hash',
      'c.content_hash as stored_hash',
      'c.outcome as stored_outcome',
    );
  return rows.map((r) => ({
    row: {
      key: r.key,
      line: r.line,
      hash: r.content_hash,
      contact: {
        email: r.email,
        name: r.name,
        external_id: r.external_id,
        professional_id: r.professional_id,
      },
    },
    stored: r.stored_hash === null ? undefined : { hash: r.stored_hash, sent: r.stored_outcome === 'sent' },
  }));
}

/** Ends a push: its scratch rows, and any a killed push left more than a day ago. */
export async function clearStagedContacts(q: Queryable, db: Tables, pushId: string): Promise<void> {
  await q(db.table('contact_push_staging'))
    .where({ push_id: pushId })
    .orWhere('staged_at', '<', q.raw(`now() - interval '1 day'`))
    .del();
}
