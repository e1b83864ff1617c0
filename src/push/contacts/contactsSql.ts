import { preparedRaw, type Queryable, type Tables } from '../../db/queryable.js';
import type { UpsertOptions } from '../../partner-api/contacts.js';
import type { ContactRow } from './contactRow.js';
import type { StoredContact } from './planPush.js';
import { isGivenUp, type UnavailableStreak } from './unavailableStreak.js';

/**
 * Before sending: the rows about to be sent, marked pending in one statement (a crash leaves
 * them so, and the next push sends them again). A name or professional the row empties keeps its
 * stored value until a push carrying its clear is taken (recordOutcomes): the platform may still
 * hold it, so a push that fails, and every retry after it, sends the clear again.
 */
export async function recordPending(q: Queryable, db: Tables, rows: readonly ContactRow[]): Promise<void> {
  if (rows.length === 0) return;
  await q(db.table('contacts'))
    .insert(
      rows.map((row) => ({
        key: row.key,
        ...row.contact,
        content_hash: row.hash,
        outcome: 'pending',
        last_error: null,
        pushed_at: q.fn.now(),
      })),
    )
    .onConflict('key')
    .merge({
      ...Object.fromEntries(
        ['email', 'external_id', 'content_hash', 'outcome', 'last_error', 'pushed_at'].map((column) => [
          column,
          q.raw('??', [`excluded.${column}`]),
        ]),
      ),
      name: q.raw('coalesce(excluded.name, contacts.name)'),
      professional_id: q.raw('coalesce(excluded.professional_id, contacts.professional_id)'),
      // The failures in a row were of the content sent before: new content starts afresh.
      unavailable_pushes: q.raw(
        'case when contacts.content_hash = excluded.content_hash then contacts.unavailable_pushes else 0 end',
      ),
      unavailable_since: q.raw(
        'case when contacts.content_hash = excluded.content_hash then contacts.unavailable_since end',
      ),
    });
}

export type ContactOutcome =
  | {
      readonly sent: true;
      readonly platformContactId: string | null;
      /** The fields it was sent cleared: the platform holds none now (see recordPending). */
      readonly cleared: UpsertOptions['clear'];
    }
  | { readonly sent: false; readonly error: string; readonly streak: UnavailableStreak };

/** After sending: how each went, in one statement for many contacts. */
export async function recordOutcomes(
  q: Queryable,
  db: Tables,
  outcomes: ReadonlyArray<{ readonly key: string; readonly outcome: ContactOutcome }>,
): Promise<void> {
  if (outcomes.length === 0) return;
  await preparedRaw(
    q,
    db,
    `update ?? as c
        set outcome = v.outcome,
            platform_contact_id = coalesce(v.platform_contact_id, c.platform_contact_id),
            last_error = v.last_error,
            unavailable_pushes = v.unavailable_pushes,
            unavailable_since = v.unavailable_since,
            name = case when v.name_cleared then null else c.name end,
            professional_id = case when v.professional_cleared then null else c.professional_id end,
            pushed_at = now()
       from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::int[], ?::timestamptz[], ?::bool[], ?::bool[])
              as v(key, outcome, platform_contact_id, last_error, unavailable_pushes, unavailable_since,
                   name_cleared, professional_cleared)
      where c.key = v.key`,
    [
      db.table('contacts'),
      outcomes.map((o) => o.key),
      outcomes.map((o) => (o.outcome.sent ? 'sent' : 'failed')),
      // pg sends a null element as SQL NULL; knex's binding type only lacks it.
      outcomes.map((o) => (o.outcome.sent ? o.outcome.platformContactId : null)) as string[],
      outcomes.map((o) => (o.outcome.sent ? null : o.outcome.error)) as string[],
      outcomes.map((o) => (o.outcome.sent ? 0 : o.outcome.streak.pushes)),
      outcomes.map((o) =>
        o.outcome.sent ? null : (o.outcome.streak.since?.toISOString() ?? null),
      ) as string[],
      outcomes.map((o) => o.outcome.sent && o.outcome.cleared?.name === true),
      outcomes.map((o) => o.outcome.sent && o.outcome.cleared?.professional_id === true),
    ],
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
  // One array per column: a statement of eight parameters whatever the batch's size.
  await preparedRaw(
    q,
    db,
    `insert into ?? (run_id, file, line, key, operation, outcome, error, content_hash)
     select ?::bigint, ?, * from unnest(?::int[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[])`,
    [
      db.table('contact_push_log'),
      run.runId ?? null,
      run.file,
      entries.map((e) => e.line) as number[],
      entries.map((e) => e.key) as string[],
      entries.map((e) => e.operation),
      entries.map((e) => e.outcome),
      entries.map((e) => e.error ?? null) as string[],
      entries.map((e) => e.contentHash ?? null) as string[],
    ],
  );
}

/**
 * Whether the platform took a contact other than `key` since `since`: then a contact it keeps
 * failing is the contact's problem, not an outage. The row log's index on `at` bounds the read.
 */
export async function platformTookContactsSince(
  q: Queryable,
  db: Tables,
  since: Date,
  key: string,
): Promise<boolean> {
  const row = await q(db.table('contact_push_log'))
    .where('at', '>=', since)
    .whereIn('outcome', ['sent_created', 'sent_updated'])
    .andWhere('key', '<>', key)
    .first(q.raw('1 as found'));
  return row !== undefined;
}

/** The database's clock, which the row log's times are read against. */
export async function databaseNow(q: Queryable): Promise<Date> {
  const { rows } = (await q.raw('select now() as now')) as { rows: Array<{ now: Date | string }> };
  return new Date(rows[0]!.now);
}

/** Keeps the row log from growing without bound. */
export async function prunePushLog(q: Queryable, db: Tables, retentionDays: number): Promise<void> {
  await q(db.table('contact_push_log'))
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
  // `earlier` reads the snapshot from before the insert: the lines the new rows replace.
  const { rows: earlier } = (await q.raw(
    `with input as (
       select * from unnest(?::text[], ?::int[], ?::text[], ?::text[], ?::text[], ?::uuid[], ?::text[])
         as t(key, line, email, name, external_id, professional_id, content_hash)
     ), earlier as (
       select s.key, s.line from ?? as s where s.push_id = ? and s.key = any(?::text[])
     ), staged as (
       insert into ?? (push_id, key, line, email, name, external_id, professional_id, content_hash)
       select ?, * from input
       on conflict (push_id, key) do update
         set line = excluded.line, email = excluded.email, name = excluded.name,
             external_id = excluded.external_id, professional_id = excluded.professional_id,
             content_hash = excluded.content_hash
     )
     select key, line from earlier`,
    [
      rows.map((r) => r.key),
      rows.map((r) => r.line),
      rows.map((r) => r.contact.email),
      rows.map((r) => r.contact.name) as string[],
      rows.map((r) => r.contact.external_id) as string[],
      rows.map((r) => r.contact.professional_id) as string[],
      rows.map((r) => r.hash),
      db.table('contact_push_staging'),
      pushId,
      rows.map((r) => r.key),
      db.table('contact_push_staging'),
      pushId,
    ],
  )) as { rows: Array<{ key: string; line: number }> };
  return new Map(earlier.map((e) => [e.key, e.line]));
}

/**
 * Statistics for the planner once a file is staged: without them it takes the push's rows for a
 * handful and reads them all for every page of the diff.
 */
export async function analyzeStagedContacts(q: Queryable, db: Tables): Promise<void> {
  await q.raw('analyze ??', [db.table('contact_push_staging')]);
}

/** A staged row with what the mirror knows of its key from an earlier push. */
export interface StagedContact {
  readonly row: ContactRow;
  readonly stored: StoredContact | undefined;
}

/** Where a page of staged rows ends: the next page starts after this line and key. */
export interface StagedPosition {
  readonly line: number;
  readonly key: string;
}

/**
 * The next staged rows of a push after a position, in file order (line, then key), each with its
 * stored contact. Paged on (line, key), which is unique within a push: two rows of one line
 * number (a reader's miscount) on either side of a page's end would otherwise lose the second,
 * never sent nor reported.
 */
export async function readStagedContacts(
  q: Queryable,
  db: Tables,
  pushId: string,
  after: StagedPosition | undefined,
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
    stored_error: string | null;
    stored_name: string | null;
    stored_professional_id: string | null;
    unavailable_pushes: number | null;
    unavailable_since: Date | string | null;
  }> = await q
    // The page is taken from the (push_id, line) index before the join: joined first, the planner
    // would read every remaining row of the push to sort them, once per page.
    .from(
      q(db.table('contact_push_staging'))
        .where('push_id', pushId)
        .modify((page) => {
          // `line >= ?` keeps the index's range; the rest takes the keys after `after.key` on its line.
          if (after !== undefined) {
            page
              .andWhere('line', '>=', after.line)
              .andWhere((next) => next.where('line', '>', after.line).orWhere('key', '>', after.key));
          }
        })
        .orderBy([{ column: 'line' }, { column: 'key' }])
        .limit(limit)
        .select('key', 'line', 'email', 'name', 'external_id', 'professional_id', 'content_hash')
        .as('s'),
    )
    .leftJoin({ c: db.table('contacts') }, 'c.key', 's.key')
    .orderBy([{ column: 's.line' }, { column: 's.key' }])
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
      'c.last_error as stored_error',
      'c.name as stored_name',
      'c.professional_id as stored_professional_id',
      'c.unavailable_pushes',
      'c.unavailable_since',
    );
  return rows.map((r) => {
    const streak = {
      pushes: r.unavailable_pushes ?? 0,
      since: r.unavailable_since === null ? null : new Date(r.unavailable_since),
    };
    return {
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
      stored:
        r.stored_hash === null
          ? undefined
          : {
              hash: r.stored_hash,
              sent: r.stored_outcome === 'sent',
              streak,
              givenUp: isGivenUp(r.stored_outcome, streak),
              error: r.stored_error,
              name: r.stored_name,
              professionalId: r.stored_professional_id,
            },
    };
  });
}

/**
 * Ends a push: its scratch rows and, for a push that holds the contacts lease, any a killed push
 * left more than a day ago. A dry run holds no lease, so it must not prune: the rows of a day-old
 * push still sending (a large export at a low rate) would go, and with them its unsent contacts.
 */
export async function clearStagedContacts(
  q: Queryable,
  db: Tables,
  pushId: string,
  options: { pruneAbandoned: boolean },
): Promise<void> {
  const rows = q(db.table('contact_push_staging')).where({ push_id: pushId });
  if (options.pruneAbandoned) rows.orWhere('staged_at', '<', q.raw(`now() - interval '1 day'`));
  await rows.del();
}

/** How many contacts are on the platform (sent), failed, or pending (a push was cut short). */
export async function countContactsByOutcome(q: Queryable, db: Tables): Promise<Record<string, number>> {
  const rows: Array<{ outcome: string; n: string | number }> = await q(db.table('contacts'))
    .select('outcome')
    .count({ n: '*' })
    .groupBy('outcome');
  return Object.fromEntries(rows.map((r) => [r.outcome, Number(r.n)]));
}

/** One file of one push, from its row log. */
export interface PushRecord {
  run_id: number;
  file: string;
  at: string;
  outcomes: Record<string, number>;
}

/** The latest pushes, newest first, with their rows counted by outcome. */
export async function readRecentPushes(q: Queryable, db: Tables, limit: number): Promise<PushRecord[]> {
  const recent: Array<{ run_id: string | number; file: string }> = await q(db.table('contact_push_log'))
    .whereNotNull('run_id')
    .select('run_id', 'file', q.raw('max(id) as last_id'))
    .groupBy('run_id', 'file')
    .orderBy('last_id', 'desc')
    .limit(limit);
  if (recent.length === 0) return [];
  const counts: Array<{
    run_id: string | number;
    file: string;
    outcome: string;
    n: string | number;
    at: Date | string;
  }> = await q(db.table('contact_push_log'))
    .whereIn(
      ['run_id', 'file'],
      recent.map((r) => [r.run_id, r.file]),
    )
    .select('run_id', 'file', 'outcome')
    .count({ n: '*' })
    .max({ at: 'at' })
    .groupBy('run_id', 'file', 'outcome');
  return recent.map((r) => {
    const mine = counts.filter((c) => String(c.run_id) === String(r.run_id) && c.file === r.file);
    const at = Math.max(...mine.map((c) => new Date(c.at).getTime()));
    return {
      run_id: Number(r.run_id),
      file: r.file,
      at: new Date(at).toISOString(),
      outcomes: Object.fromEntries(mine.map((c) => [c.outcome, Number(c.n)])),
    };
  });
}
