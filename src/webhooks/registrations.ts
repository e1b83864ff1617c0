import type { Db } from '../db/connect.js';

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
  url: string;
  events?: readonly string[] | undefined;
  is_active?: boolean | undefined;
  created_at?: string | undefined;
  description?: string | null | undefined;
  last_error?: string | null | undefined;
}

/** Records a registration we just made, with its secret. */
export async function saveRegistration(
  db: Db,
  webhook: WebhookSnapshot & { signing_secret: string },
): Promise<void> {
  await db
    .knex(db.table('webhooks'))
    .insert({
      id: webhook.id,
      url: webhook.url,
      description: webhook.description ?? null,
      events: [...(webhook.events ?? [])],
      signing_secret: webhook.signing_secret,
      created_at: webhook.created_at ?? null,
      registered_at: db.knex.fn.now(),
      is_active: webhook.is_active ?? true,
      last_error: webhook.last_error ?? null,
    })
    .onConflict('id')
    .merge(['url', 'description', 'events', 'signing_secret', 'created_at', 'registered_at', 'is_active']);
}

/** Marks a webhook deleted: its secret stops being accepted. Returns whether it was known. */
export async function markDeleted(db: Db, id: string): Promise<boolean> {
  const count = await db
    .knex(db.table('webhooks'))
    .where({ id })
    .whereNull('deleted_at')
    .update({ deleted_at: db.knex.fn.now() });
  return count > 0;
}

/**
 * Records the platform's list: state and last_error of every webhook it shows (adding those
 * registered elsewhere, without a secret). A webhook the list does not show keeps its row and
 * its secret, since a list read right after a registration may lag behind it; its stale
 * `checked_at` says it was not listed.
 */
export async function recordListed(db: Db, listed: readonly WebhookSnapshot[]): Promise<void> {
  if (listed.length === 0) return;
  const unique = new Map(listed.map((w) => [w.id, w]));
  await db
    .knex(db.table('webhooks'))
    .insert(
      [...unique.values()].map((w) => ({
        id: w.id,
        url: w.url,
        description: w.description ?? null,
        events: [...(w.events ?? [])],
        created_at: w.created_at ?? null,
        is_active: w.is_active ?? null,
        last_error: w.last_error ?? null,
        checked_at: db.knex.fn.now(),
      })),
    )
    .onConflict('id')
    .merge(['url', 'is_active', 'last_error', 'checked_at']);
}

/** Every webhook not deleted by us, oldest first. */
export async function listStored(db: Db): Promise<StoredWebhook[]> {
  return db
    .knex(db.table('webhooks'))
    .whereNull('deleted_at')
    .orderBy([{ column: 'registered_at', order: 'asc', nulls: 'last' }, { column: 'id' }]);
}

/** Signing secrets of the webhooks we registered and did not delete. */
export async function activeSecrets(db: Db): Promise<string[]> {
  const rows: Array<{ signing_secret: string }> = await db
    .knex(db.table('webhooks'))
    .whereNull('deleted_at')
    .whereNotNull('signing_secret')
    .orderBy([{ column: 'registered_at', order: 'desc', nulls: 'last' }, { column: 'id' }])
    .select('signing_secret');
  return rows.map((r) => r.signing_secret);
}
