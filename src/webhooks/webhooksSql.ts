import type { Queryable, Tables } from '../db/queryable.js';
import { storableText } from '../db/storableText.js';

/**
 * The `webhooks` table: the platform's webhooks as we last knew them, with the signing secret of
 * those we registered ourselves (the platform shows it only once).
 */

export interface StoredWebhook {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  signing_secret: string | null;
  created_at: Date | null;
  registered_at: Date | null;
  deleted_at: Date | null;
  is_active: boolean | null;
  last_error: string | null;
  checked_at: Date | null;
}

/** What the platform says about one webhook (registration response or list entry). */
export interface WebhookSnapshot {
  id: string;
  /** Undefined when the platform did not show it (a list keeps the one stored). */
  url?: string | undefined;
  /** Null when the platform showed them unreadably. */
  events?: readonly string[] | null | undefined;
  is_active?: boolean | undefined;
  created_at?: string | undefined;
  description?: string | null | undefined;
  last_error?: string | null | undefined;
}

/**
 * The platform's `created_at` of a webhook, whose format the spec does not show: any date that
 * JavaScript reads, as ISO 8601 in UTC, or null when it reads none PostgreSQL could store. It only
 * informs, so it never fails the statement that stores a registration's secret.
 */
function storableCreatedAt(value: string | undefined): string | null {
  const ms = value === undefined ? Number.NaN : Date.parse(value);
  if (!Number.isFinite(ms)) return null;
  const date = new Date(ms);
  const year = date.getUTCFullYear();
  return year >= 1 && year <= 9999 ? date.toISOString() : null;
}

/** A snapshot's text as PostgreSQL can store it (see storableText). */
function storableSnapshot(webhook: WebhookSnapshot) {
  return {
    id: storableText(webhook.id),
    url: storableText(webhook.url ?? ''),
    description: storableText(webhook.description ?? null),
    events: (webhook.events ?? []).map((e) => storableText(e)),
    created_at: storableCreatedAt(webhook.created_at),
    last_error: storableText(webhook.last_error ?? null),
  };
}

/** Records a registration we just made, with its secret. */
export async function saveRegistration(
  q: Queryable,
  db: Tables,
  webhook: WebhookSnapshot & { signing_secret: string },
): Promise<void> {
  await q(db.table('webhooks'))
    .insert({
      ...storableSnapshot(webhook),
      signing_secret: webhook.signing_secret,
      registered_at: q.fn.now(),
      is_active: webhook.is_active ?? true,
    })
    .onConflict('id')
    .merge(['url', 'description', 'events', 'signing_secret', 'created_at', 'registered_at', 'is_active']);
}

/**
 * Marks a webhook deleted: its secret stops being accepted. Returns whether it was known. `id` is
 * the platform's, looked up as it was stored.
 */
export async function markWebhookDeleted(q: Queryable, db: Tables, id: string): Promise<boolean> {
  const count = await q(db.table('webhooks'))
    .where({ id: storableText(id) })
    .whereNull('deleted_at')
    .update({ deleted_at: q.fn.now() });
  return count > 0;
}

/**
 * Records the platform's list: state and last_error of every webhook it shows (adding those
 * registered elsewhere, without a secret). A webhook the list does not show keeps its row and
 * its secret, since a list read right after a registration may lag behind it; its stale
 * `checked_at` says it was not listed.
 */
export async function recordListedWebhooks(
  q: Queryable,
  db: Tables,
  listed: readonly WebhookSnapshot[],
): Promise<void> {
  // Deduplicated as stored: ON CONFLICT cannot update one row twice in a statement.
  const unique = [...new Map(listed.map((w) => [storableText(w.id), w])).values()];
  // A statement holds at most 65,535 parameters: a company with ten thousand webhooks is recorded
  // in several.
  for (let start = 0; start < unique.length; start += RECORD_CHUNK) {
    await q(db.table('webhooks'))
      .insert(
        unique.slice(start, start + RECORD_CHUNK).map((w) => ({
          ...storableSnapshot(w),
          is_active: w.is_active ?? null,
          checked_at: q.fn.now(),
        })),
      )
      .onConflict('id')
      .merge({
        // A list that does not show the URL keeps the one stored: ensure finds our webhook by it.
        url: q.raw(`coalesce(nullif(excluded.url, ''), ??)`, ['webhooks.url']),
        is_active: q.raw('excluded.is_active'),
        last_error: q.raw('excluded.last_error'),
        checked_at: q.raw('excluded.checked_at'),
      });
  }
}

/** Rows per statement of recordListedWebhooks: 7 parameters each. */
const RECORD_CHUNK = 1000;

/** Every webhook not deleted by us, oldest first. */
export async function listStoredWebhooks(q: Queryable, db: Tables): Promise<StoredWebhook[]> {
  return q(db.table('webhooks'))
    .whereNull('deleted_at')
    .orderBy([{ column: 'registered_at', order: 'asc', nulls: 'last' }, { column: 'id' }]);
}

/** Ids of the webhooks we registered (their secret is stored) and did not delete; never the secrets. */
export async function listWebhookIdsWithSecret(q: Queryable, db: Tables): Promise<Set<string>> {
  const rows: Array<{ id: string }> = await q(db.table('webhooks'))
    .whereNull('deleted_at')
    .whereNotNull('signing_secret')
    .select('id');
  return new Set(rows.map((r) => r.id));
}

/** Signing secrets of the webhooks we registered and did not delete. */
export async function listActiveSecrets(q: Queryable, db: Tables): Promise<string[]> {
  const rows: Array<{ signing_secret: string }> = await q(db.table('webhooks'))
    .whereNull('deleted_at')
    .whereNotNull('signing_secret')
    .orderBy([{ column: 'registered_at', order: 'desc', nulls: 'last' }, { column: 'id' }])
    .select('signing_secret');
  return rows.map((r) => r.signing_secret);
}

export interface MissRate {
  /** Reviews first seen in the window, by how they first reached us. */
  readonly feed: number;
  readonly webhook: number;
  /** feed / (feed + webhook); null when no review was first seen in the window. */
  readonly ratio: number | null;
}

/**
 * How often the poll had to fill in for a webhook: among reviews first seen in the last
 * `windowHours`, the share whose first sighting came from the feed (`source = 'feed'`).
 */
export async function readWebhookMissRate(q: Queryable, db: Tables, windowHours = 24): Promise<MissRate> {
  // Only reviews created since the first registration could have been delivered: a backfill of
  // older reviews is no miss.
  const rows: Array<{ source: string; n: string | number }> = await q(db.table('reviews'))
    .where('first_seen_at', '>', q.raw(`now() - make_interval(hours => ?)`, [windowHours]))
    .where('created_at', '>=', q(db.table('webhooks')).min(q.raw('coalesce(registered_at, created_at)')))
    .groupBy('source')
    .select('source', q.raw('count(*) as n'));
  const count = (source: string) => Number(rows.find((r) => r.source === source)?.n ?? 0);
  return missRate(count('feed'), count('webhook'));
}

/** The rate of `feed` first sightings among `feed + webhook`: none when both are 0. */
export function missRate(feed: number, webhook: number): MissRate {
  return { feed, webhook, ratio: feed + webhook === 0 ? null : feed / (feed + webhook) };
}
