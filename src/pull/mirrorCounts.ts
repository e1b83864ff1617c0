import type { Db } from '../db/connect.js';

/** Row counts of the mirror's tables, for `status`. */
export interface MirrorCounts {
  reviews: { total: number; removed: number; by_source: { feed: number; webhook: number } };
  locations: { total: number; removed: number };
  professionals: { total: number; removed: number };
}

/** Null while the tables do not exist yet (migrations pending). */
export async function readMirrorCounts(db: Db): Promise<MirrorCounts | null> {
  const has = (table: string) => db.knex.schema.withSchema(db.schema).hasTable(table);
  if (!(await has('reviews')) || !(await has('locations')) || !(await has('professionals'))) return null;
  const removed = db.knex.raw('count(*) filter (where removed_at is not null) as removed');
  const [reviews] = await db
    .knex(db.table('reviews'))
    .select(
      db.knex.raw('count(*) as total'),
      removed,
      db.knex.raw(`count(*) filter (where source = 'feed') as feed`),
      db.knex.raw(`count(*) filter (where source = 'webhook') as webhook`),
    );
  const directory = async (table: string) => {
    const [row] = await db.knex(db.table(table)).select(db.knex.raw('count(*) as total'), removed);
    return { total: Number(row.total), removed: Number(row.removed) };
  };
  return {
    reviews: {
      total: Number(reviews.total),
      removed: Number(reviews.removed),
      by_source: { feed: Number(reviews.feed), webhook: Number(reviews.webhook) },
    },
    locations: await directory('locations'),
    professionals: await directory('professionals'),
  };
}

export function formatMirrorCounts(counts: MirrorCounts | null | undefined): string[] {
  if (!counts) return [];
  const { reviews, locations, professionals } = counts;
  return [
    'mirror:',
    `  reviews        ${reviews.total} (removed ${reviews.removed}; first seen by feed ${reviews.by_source.feed}, by webhook ${reviews.by_source.webhook})`,
    `  locations      ${locations.total} (removed ${locations.removed})`,
    `  professionals  ${professionals.total} (removed ${professionals.removed})`,
  ];
}
