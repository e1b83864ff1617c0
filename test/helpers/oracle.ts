import { expect } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import type { TruthReview } from '../../src/sandbox/controlClient.js';
import type { TestSandbox } from './sandbox.js';

/** The mirror's current (not removed) reviews, in the shape of the sandbox's truth. */
export async function mirroredReviews(db: Db) {
  const rows = await db.knex(db.table('reviews')).whereNull('removed_at').orderBy('id');
  return rows.map((r) => ({
    id: r.id as string,
    review_number: r.review_number as string,
    created_at: (r.created_at as Date).toISOString(),
    rating: Number(r.rating),
    comment: r.comment as string | null,
    is_verified: r.is_verified as boolean,
    reviewer: { name: r.reviewer_name as string | null, email: r.reviewer_email as string | null },
    professional: { id: r.professional_id as string | null, name: r.professional_name as string | null },
  }));
}

const truthShape = (r: TruthReview) => ({
  id: r.id,
  review_number: r.review_number,
  created_at: new Date(r.created_at).toISOString(),
  rating: r.rating,
  comment: r.comment,
  is_verified: r.is_verified,
  reviewer: r.reviewer,
  professional: r.professional,
});

/**
 * The oracle: the mirror equals what the platform shows. Set equality of ids and field-by-field
 * equality with the sandbox's feed; returns how many reviews that is.
 */
export async function expectExactMirror(db: Db, sandbox: TestSandbox, companyId = sandbox.companyId) {
  const truth = (await sandbox.control.visibleReviews(companyId)).map(truthShape);
  truth.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const mirror = await mirroredReviews(db);
  expect(mirror.length).toBe(truth.length);
  // One assertion over the whole set would print 20,000 rows on failure; find the first difference.
  for (let i = 0; i < truth.length; i++) {
    if (JSON.stringify(mirror[i]) !== JSON.stringify(truth[i])) expect(mirror[i]).toEqual(truth[i]);
  }
  return truth.length;
}
