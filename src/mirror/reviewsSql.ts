import { finished } from 'node:stream/promises';
import type { Knex } from 'knex';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { preparedRaw, type Queryable, type Tables } from '../db/queryable.js';
import { uuidText } from '../partner-api/uuidText.js';
import { arrayLiteral, arrayLiteralOf } from './arrayLiteral.js';
import { copyField } from './copyText.js';
import { latestPerId, type ReviewRow } from './reviewRow.js';

export type ReviewSource = 'feed' | 'webhook';

export interface UpsertCounts {
  inserted: number;
  updated: number;
}

/**
 * The columns the upsert writes from a row, in the order of its unnest, each with its text as
 * PostgreSQL parses it for the column's type. Read by a function per column (not `row[name]`), so
 * each encodes one shape of value: this runs for every column of every review of a backfill.
 */
function rowColumns(): ReadonlyArray<
  readonly [name: keyof ReviewRow, text: (row: ReviewRow) => string | null]
> {
  // The rows of one page share one observed_at: formatted once per page, not once per row.
  let observed: Date | undefined;
  let observedText = '';
  return [
    ['review_number', (r) => r.review_number],
    ['created_at', (r) => r.created_at],
    ['rating', (r) => String(r.rating)],
    ['comment', (r) => r.comment],
    ['is_verified', (r) => (r.is_verified ? 't' : 'f')],
    ['reviewer_name', (r) => r.reviewer_name],
    ['reviewer_email', (r) => r.reviewer_email],
    ['professional_id', (r) => r.professional_id],
    ['professional_name', (r) => r.professional_name],
    [
      'observed_at',
      (r) => {
        if (r.observed_at !== observed) {
          observed = r.observed_at;
          observedText = observed.toISOString();
        }
        return observedText;
      },
    ],
  ];
}

const FIELDS = rowColumns().map(([name]) => name);

/** A data-modifying statement and its bindings, to run alone or as one CTE of a larger statement. */
export interface Statement {
  readonly sql: string;
  readonly bindings: readonly unknown[];
}

/**
 * The review upsert as one `insert … returning (xmax = 0) as inserted`, for `rows` already unique
 * by id. A version observed earlier than the stored one never overwrites it (out-of-order webhook
 * deliveries), but every sighting moves `last_seen_at`. Rows from the feed also stamp
 * `feed_seen_at` and clear `removed_at`: the feed shows them again. `source` is written only on
 * insert.
 */
export function reviewUpsertStatement(
  db: Tables,
  unique: readonly ReviewRow[],
  source: ReviewSource,
): Statement {
  const fromFeed = source === 'feed';
  // One array per column: the statement's text and its eleven parameters are the same whatever
  // the batch, so building it costs nothing and the server plans it from a short text.
  return {
    sql: `insert into ?? as r (${FIELDS.join(', ')}, id, source, feed_seen_at)
     select v.*, ?, ${fromFeed ? 'now()' : 'null::timestamptz'}
       from unnest(?::text[], ?::timestamptz[], ?::numeric[], ?::text[], ?::boolean[], ?::text[],
                   ?::text[], ?::uuid[], ?::text[], ?::timestamptz[], ?::uuid[])
            as v(${FIELDS.join(', ')}, id)
     on conflict (id) do update set
       ${FIELDS.map((f) => `${f} = case when excluded.observed_at >= r.observed_at then excluded.${f} else r.${f} end`).join(',\n       ')},
       last_seen_at = now()${fromFeed ? ', feed_seen_at = now(), removed_at = null' : ''}
     returning (xmax = 0) as inserted`,
    bindings: [
      db.table('reviews'),
      source,
      ...rowColumns().map(([, text]) => arrayLiteralOf(unique, text)),
      arrayLiteralOf(unique, (r) => r.id),
    ],
  };
}

/** Upserts reviews in one statement (see reviewUpsertStatement), returning what it inserted and updated. */
export async function upsertReviews(
  q: Queryable,
  db: Tables,
  rows: readonly ReviewRow[],
  source: ReviewSource,
): Promise<UpsertCounts> {
  const unique = latestPerId(rows);
  if (unique.length === 0) return { inserted: 0, updated: 0 };
  const upsert = reviewUpsertStatement(db, unique, source);
  // A backfill runs this a thousand times per million reviews: planned once per connection.
  const result = await preparedRaw(
    q,
    db,
    `with upserted as (${upsert.sql})
     select count(*) filter (where inserted) as inserted, count(*) as total from upserted`,
    upsert.bindings as Knex.RawBinding[],
  );
  // One row of counts back, not one per review.
  const [counts] = result.rows as Array<{ inserted: string | number; total: string | number }>;
  const inserted = Number(counts?.inserted ?? 0);
  return { inserted, updated: Number(counts?.total ?? 0) - inserted };
}

/**
 * Inserts reviews read from the feed with COPY, as the upsert would insert them (`source` feed,
 * `feed_seen_at` the transaction's time), for a group in which no review is expected to be stored
 * yet: COPY writes a page of rows at a time and checks no conflict, so PostgreSQL spends about a
 * fifth less than on the upsert (docs/benchmarks.md). The rows arrive page by page while the walk
 * fetches the next and go to the server as they come, so a group of any size holds no more than a
 * page in memory. A review that is stored already (or twice in the group) fails the whole COPY with
 * a unique violation, and the transaction must then be rolled back. Only on a PostgreSQL server,
 * inside a transaction (`trx`). Returns how many reviews it inserted.
 */
export async function copyNewReviews(
  trx: Knex.Transaction,
  db: Tables,
  pages: AsyncIterable<readonly ReviewRow[]> | Iterable<readonly ReviewRow[]>,
): Promise<number> {
  // The upsert stamps feed_seen_at with now(); COPY takes values only, so it is read once.
  const { rows: clock } = await trx.raw('select now()::text as now');
  const feedSeen = `\tfeed\t${(clock as Array<{ now: string }>)[0]!.now}\n`;
  // A knex transaction hands out its own connection, which COPY needs: it is not a query knex runs.
  const connection: pg.Client & { readonly __knexUid?: string } = await trx.client.acquireConnection();
  const sql = `copy ${connection.escapeIdentifier(db.schema)}.reviews (${FIELDS.join(', ')}, id, source, feed_seen_at) from stdin`;
  const copy = connection.query(copyFrom(sql));
  // The server refuses a row as soon as it reads it (and ignores the rest of the COPY), or the
  // connection fails: the stream reports either by an 'error' event alone (it is not destroyed),
  // and can send no more.
  let failed = false;
  copy.once('error', (error) => {
    failed = true;
    // Reported as knex reports a failure of a query it ran itself, which a COPY is not: one pg
    // gave up on (its read timeout) then has its connection discarded by the pool's listener,
    // instead of the transaction's ROLLBACK waiting behind it on a frozen connection.
    trx.client.emit('query-error', error, { __knexUid: connection.__knexUid, sql });
  });
  const done = finished(copy);
  // Observed below; a failure while the next page is awaited must not go unhandled meanwhile.
  done.catch(() => {});
  const columns = rowColumns();
  try {
    for await (const rows of pages) {
      if (failed) break;
      let text = '';
      for (const row of rows) {
        for (const [, value] of columns) text += `${copyField(value(row))}\t`;
        text += row.id + feedSeen;
      }
      // One page at a time, the next written once the last is handed to the socket: a page left
      // in the stream's buffer is written by the stream itself when the socket drains, even after
      // the server refused the COPY, when pg-copy-streams has already let go of its connection
      // (a TypeError thrown from the socket's 'drain', which no caller can catch). Here the
      // refusal is seen (`failed`) before anything more is written.
      await Promise.race([
        new Promise<void>((resolve, reject) =>
          copy.write(text, (error) => (error ? reject(error) : resolve())),
        ),
        done,
      ]);
    }
  } catch (error) {
    // The pages stopped coming: CopyFail ends the COPY, so the transaction can roll back.
    if (!failed) copy.destroy(error as Error);
    throw error;
  }
  if (!failed) copy.end();
  await done;
  return copy.rowCount;
}

/**
 * After a complete reconcile walk that started at `walkStartedAt`: every review the walk did not
 * return (not seen by the feed since the walk began) and that existed before it began is no
 * longer public. Returns how many were marked.
 */
export async function markRemovedReviews(q: Queryable, db: Tables, walkStartedAt: Date): Promise<number> {
  return q(db.table('reviews'))
    .whereNull('removed_at')
    .where('first_seen_at', '<', walkStartedAt)
    .where((w) => w.whereNull('feed_seen_at').orWhere('feed_seen_at', '<', walkStartedAt))
    .update({ removed_at: q.fn.now() });
}

/**
 * Reviews the feed returned that failed their schema (ids as rejectedRecordId gives them): they
 * still exist on the platform, so they count as seen by the feed and a reconcile does not mark
 * them removed; each keeps its last valid version. An id that is no UUID names no stored review,
 * and leaving it out keeps the lookup on the primary key.
 */
export async function markSeenByFeed(q: Queryable, db: Tables, ids: readonly string[]): Promise<void> {
  const uuids = ids.flatMap((id) => {
    const parsed = uuidText.safeParse(id);
    return parsed.success ? [parsed.data] : [];
  });
  if (uuids.length === 0) return;
  await q(db.table('reviews'))
    .whereRaw('?? = any(?::uuid[])', ['id', arrayLiteral(uuids)])
    .update({ last_seen_at: q.fn.now(), feed_seen_at: q.fn.now(), removed_at: null });
}

export interface ReviewCounts {
  total: number;
  removed: number;
  by_source: { feed: number; webhook: number };
}

/** Every stored review, removed or not, and how each first reached us. */
export async function countReviews(q: Queryable, db: Tables): Promise<ReviewCounts> {
  const [row] = await q(db.table('reviews')).select(
    q.raw('count(*) as total'),
    q.raw('count(*) filter (where removed_at is not null) as removed'),
    q.raw(`count(*) filter (where source = 'feed') as feed`),
    q.raw(`count(*) filter (where source = 'webhook') as webhook`),
  );
  return {
    total: Number(row.total),
    removed: Number(row.removed),
    by_source: { feed: Number(row.feed), webhook: Number(row.webhook) },
  };
}

/** Reviews the platform still shows, per rating, lowest first. */
export async function countRatings(
  q: Queryable,
  db: Tables,
): Promise<Array<{ rating: string; count: number }>> {
  const rows: Array<{ rating: string; count: string | number }> = await q(db.table('reviews'))
    .whereNull('removed_at')
    .select(q.raw('rating::text as rating'), q.raw('count(*) as count'))
    .groupBy('rating')
    .orderBy('rating');
  return rows.map((r) => ({ rating: r.rating, count: Number(r.count) }));
}

export async function hasReview(q: Queryable, db: Tables, id: string): Promise<boolean> {
  return (await q(db.table('reviews')).where({ id }).first('id')) !== undefined;
}
