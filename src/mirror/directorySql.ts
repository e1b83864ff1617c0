import type { Queryable, Tables } from '../db/queryable.js';
import { storableText } from '../db/storableText.js';
import type { Location } from '../partner-api/locationsSchema.js';
import type { ProfessionalListItem } from '../partner-api/professionalsSchema.js';
import { uuidText } from '../partner-api/uuidText.js';
import { arrayLiteral } from './arrayLiteral.js';

/** The directory's tables: `locations` and `professionals`. */
export type DirectoryTable = 'locations' | 'professionals';

/**
 * A directory id as text, in the form the mirror stores and compares it: a UUID (a professional's)
 * in lower case, as `uuidText` makes the ids of valid records and as PostgreSQL prints its `uuid`
 * type; anything else (a location's integer, an id that is no UUID) as it is. A record sent with
 * `"ID"` in upper case and rejected keeps that case in its raw (and quarantine row): compared as
 * sent, it would match no stored id, and a record still listed would be marked removed.
 */
export function directoryIdText(id: string | number): string {
  const text = String(id);
  const parsed = uuidText.safeParse(text);
  return parsed.success ? parsed.data : text;
}

const lastPerId = <T extends { id: unknown }>(items: readonly T[]): T[] => [
  ...new Map(items.map((i) => [i.id, i])).values(),
];

/** Upserts listed locations in one statement; a listed record is not removed (any more). */
export async function upsertLocations(
  q: Queryable,
  db: Tables,
  locations: readonly Location[],
): Promise<number> {
  const rows = lastPerId(locations).map((l) => ({
    id: l.id,
    slug: storableText(l.slug),
    name: storableText(l.name),
    active: l.active,
    address_line1: storableText(l.address.line1),
    address_line2: storableText(l.address.line2),
    address_city: storableText(l.address.city),
    address_state: storableText(l.address.state),
    address_zip: storableText(l.address.zip),
    profile_url: storableText(l.profile_url),
    default_survey_url: storableText(l.default_survey_url),
    created_at: l.created_at,
  }));
  if (rows.length === 0) return 0;
  await q(db.table('locations'))
    .insert(rows)
    .onConflict('id')
    .merge({
      ...Object.fromEntries(Object.keys(rows[0]!).map((k) => [k, q.raw('excluded.??', [k])])),
      last_seen_at: q.fn.now(),
      removed_at: null,
    });
  return rows.length;
}

/** The professional's fields that a listing carries (everything but `location_id`, spec 2.3). */
const PROFESSIONAL_LISTED_FIELDS = [
  'slug',
  'first_name',
  'last_name',
  'active',
  'profile_url',
  'default_survey_url',
  'created_at',
] as const;

/** What the mirror holds of a professional, as far as deciding on a single read goes. */
export interface StoredProfessional {
  readonly slug: string;
  readonly first_name: string;
  readonly last_name: string;
  readonly active: boolean;
  readonly profile_url: string;
  readonly default_survey_url: string | null;
  readonly detail_fetched_at: Date | null;
  readonly removed_at: Date | null;
}

export async function readStoredProfessionals(
  q: Queryable,
  db: Tables,
  ids: readonly string[],
): Promise<Map<string, StoredProfessional>> {
  if (ids.length === 0) return new Map();
  const rows = await q(db.table('professionals'))
    .whereIn('id', ids)
    .select('id', ...PROFESSIONAL_LISTED_FIELDS, 'detail_fetched_at', 'removed_at');
  return new Map(rows.map((r) => [r.id as string, r as StoredProfessional]));
}

/** A listed professional and, when it was read this run, its `location_id`. */
export interface ProfessionalUpsert {
  readonly item: ProfessionalListItem;
  readonly detail: { readonly location_id: number | null } | undefined;
}

/**
 * Upserts listed professionals in one statement. `location_id` is written only for those whose
 * single record was read; the others keep what the mirror had.
 */
export async function upsertProfessionals(
  q: Queryable,
  db: Tables,
  professionals: readonly ProfessionalUpsert[],
): Promise<number> {
  const table = db.table('professionals');
  const rows = lastPerId(professionals.map((p) => ({ ...p.item, _detail: p.detail }))).map(
    ({ _detail, ...p }) => ({
      id: p.id,
      slug: storableText(p.slug),
      first_name: storableText(p.first_name),
      last_name: storableText(p.last_name),
      active: p.active,
      profile_url: storableText(p.profile_url),
      default_survey_url: storableText(p.default_survey_url),
      created_at: p.created_at,
      location_id: _detail?.location_id ?? null,
      detail_fetched_at: _detail === undefined ? null : q.fn.now(),
    }),
  );
  if (rows.length === 0) return 0;
  const read = 'excluded.detail_fetched_at is not null';
  await q(table)
    .insert(rows)
    .onConflict('id')
    .merge({
      ...Object.fromEntries(PROFESSIONAL_LISTED_FIELDS.map((k) => [k, q.raw('excluded.??', [k])])),
      location_id: q.raw(`case when ${read} then excluded.location_id else ??.location_id end`, [table]),
      detail_fetched_at: q.raw(
        `case when ${read} then excluded.detail_fetched_at else ??.detail_fetched_at end`,
        [table],
      ),
      last_seen_at: q.fn.now(),
      removed_at: null,
    });
  return rows.length;
}

/**
 * Stored records a listing returned that failed their schema (ids as text, as sent, in any case:
 * compared as `directoryIdText` gives them), or whose single read failed: they exist on the
 * platform, so they count as listed and are not marked removed; each keeps its last valid version.
 */
export async function markListed(
  q: Queryable,
  db: Tables,
  tableName: DirectoryTable,
  ids: readonly string[],
): Promise<void> {
  if (ids.length === 0) return;
  await q(db.table(tableName))
    .whereRaw('??::text = any(?::text[])', ['id', arrayLiteral(ids.map(directoryIdText))])
    .update({ last_seen_at: q.fn.now(), removed_at: null });
}

/** What the complete listings that began at `startedAt` did not return: candidates for removal. */
export async function unlistedSince(
  q: Queryable,
  db: Tables,
  tableName: DirectoryTable,
  startedAt: Date,
): Promise<Array<{ id: string | number; slug: string }>> {
  return q(db.table(tableName))
    .whereNull('removed_at')
    .where('last_seen_at', '<', startedAt)
    .select('id', 'slug');
}

/**
 * A stored record the platform should still answer for by its slug, not among `excluded` (ids as
 * text): the one listed last, and for a professional one whose single read has succeeded before.
 * What a run reads to tell a single read that is down from records that fail on their own.
 */
export async function probeTarget(
  q: Queryable,
  db: Tables,
  tableName: DirectoryTable,
  excluded: readonly string[],
): Promise<{ id: string | number; slug: string } | undefined> {
  const query = q(db.table(tableName))
    .whereNull('removed_at')
    .whereRaw('not (??::text = any(?::text[]))', ['id', arrayLiteral(excluded.map(directoryIdText))])
    .orderBy('last_seen_at', 'desc')
    .first('id', 'slug');
  if (tableName === 'professionals') query.whereNotNull('detail_fetched_at');
  return query;
}

/** After complete listings that began at `startedAt` (and the candidates' confirmation): what they did not return is gone. */
export async function markRemovedDirectory(
  q: Queryable,
  db: Tables,
  tableName: DirectoryTable,
  startedAt: Date,
): Promise<number> {
  return q(db.table(tableName))
    .whereNull('removed_at')
    .where('last_seen_at', '<', startedAt)
    .update({ removed_at: q.fn.now() });
}

/** Every stored record of `tableName`, and how many of them the platform no longer lists. */
export async function countDirectory(
  q: Queryable,
  db: Tables,
  tableName: DirectoryTable,
): Promise<{ total: number; removed: number }> {
  const [row] = await q(db.table(tableName)).select(
    q.raw('count(*) as total'),
    q.raw('count(*) filter (where removed_at is not null) as removed'),
  );
  return { total: Number(row.total), removed: Number(row.removed) };
}
