import type { Db } from '../db/connect.js';
import { countDirectory } from '../mirror/directorySql.js';
import { countReviews, type ReviewCounts } from '../mirror/reviewsSql.js';
import { hasTables } from './statusSql.js';

/** Row counts of the mirror's tables, for `status`. */
export interface MirrorCounts {
  reviews: ReviewCounts;
  locations: { total: number; removed: number };
  professionals: { total: number; removed: number };
}

/** Null while the tables do not exist yet (migrations pending). */
export async function readMirrorCounts(db: Db): Promise<MirrorCounts | null> {
  if (!(await hasTables(db.knex, db, ['reviews', 'locations', 'professionals']))) return null;
  return {
    reviews: await countReviews(db.knex, db),
    locations: await countDirectory(db.knex, db, 'locations'),
    professionals: await countDirectory(db.knex, db, 'professionals'),
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
