import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TruthReview } from '../../src/sandbox/controlClient.js';
import { type SyncedMirror, syncedMirror } from './syncedMirror.js';

interface Group {
  reviews: number;
  sum: number;
  verified: number;
}

/** The views' groups computed from the platform's own data, keyed by `month|key`. */
function groupBy(
  reviews: readonly TruthReview[],
  key: (r: TruthReview) => string | null,
): Map<string, Group> {
  const groups = new Map<string, Group>();
  for (const r of reviews) {
    const id = `${r.created_at.slice(0, 7)}|${key(r) ?? ''}`;
    const g = groups.get(id) ?? { reviews: 0, sum: 0, verified: 0 };
    g.reviews++;
    g.sum += r.rating;
    if (r.is_verified) g.verified++;
    groups.set(id, g);
  }
  return groups;
}

interface MonthlyRow {
  month: string;
  reviews: string | number;
  average_rating: string;
  verified_reviews: string | number;
  verified_share: string;
}

const monthOf = (m: string) => m.slice(0, 7);

function expectGroups(
  rows: Array<MonthlyRow & { key: string | number | null }>,
  expected: Map<string, Group>,
) {
  const actual = new Map(rows.map((r) => [`${monthOf(r.month)}|${r.key ?? ''}`, r]));
  expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort());
  for (const [id, g] of expected) {
    const row = actual.get(id)!;
    expect(Number(row.reviews), id).toBe(g.reviews);
    expect(Number(row.verified_reviews), id).toBe(g.verified);
    expect(Number(row.average_rating), id).toBeCloseTo(g.sum / g.reviews, 10);
    expect(Number(row.verified_share), id).toBeCloseTo(g.verified / g.reviews, 10);
  }
}

/** README's example queries: the sql blocks between its `readme-queries` markers. */
function readmeQueries(): string[] {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const section = /<!-- readme-queries[^>]*-->([\s\S]*?)<!-- end readme-queries -->/.exec(readme)?.[1] ?? '';
  return [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

describe('views over a synced mirror', () => {
  let mirror: SyncedMirror;
  let visible: TruthReview[];
  let locationOf: Map<string, number | null>;
  let namesOf: Map<string, string>;
  let locationNames: Map<number, string>;
  beforeAll(async () => {
    mirror = await syncedMirror();
    visible = await mirror.sandbox.control.visibleReviews(mirror.sandbox.companyId);
    const truth = await mirror.sandbox.control.truth(mirror.sandbox.companyId);
    locationOf = new Map(truth.professionals.map((p) => [p.id, p.location_id]));
    namesOf = new Map(truth.professionals.map((p) => [p.id, `${p.first_name} ${p.last_name}`]));
    locationNames = new Map(truth.locations.map((l) => [l.id, l.name]));
  }, 120_000);
  afterAll(async () => {
    await mirror?.close();
  });
  const view = (name: string) => mirror.db.knex(mirror.db.table(name));
  // month as text: a date parsed into a JS Date would move with the test machine's time zone.
  const monthly = (name: string, key: string) =>
    view(name).select(
      mirror.db.knex.raw('month::text as month'),
      `${key} as key`,
      'reviews',
      'average_rating',
      'verified_reviews',
      'verified_share',
    );

  it('current_reviews holds exactly the public reviews, with professional and location names', async () => {
    const rows = await view('current_reviews');
    expect(rows.map((r) => r.id).sort()).toEqual(visible.map((r) => r.id).sort());
    for (const id of mirror.suppressed) expect(rows.some((r) => r.id === id)).toBe(false);
    // The removed reviews are still in the table: the view is what hides them.
    expect(
      await mirror.db
        .knex(mirror.db.table('reviews'))
        .whereIn('id', mirror.suppressed)
        .whereNotNull('removed_at'),
    ).toHaveLength(3);

    const byId = new Map(rows.map((r) => [r.id, r]));
    let located = 0;
    for (const r of visible) {
      const row = byId.get(r.id)!;
      expect(Number(row.rating)).toBe(r.rating);
      const directoryName = r.professional.id === null ? undefined : namesOf.get(r.professional.id);
      expect(row.professional_name).toBe(directoryName ?? r.professional.name);
      const location = r.professional.id === null ? null : (locationOf.get(r.professional.id) ?? null);
      expect(row.location_id).toBe(location);
      expect(row.location_name).toBe(location === null ? null : locationNames.get(location));
      if (location !== null) located++;
    }
    expect(located).toBeGreaterThan(20);
  });

  it('professional_monthly_ratings: count, average and verified share per professional and month', async () => {
    const rows = await monthly('professional_monthly_ratings', 'professional_id');
    const expected = groupBy(visible, (r) => r.professional.id);
    // Several months and several professionals, so the grouping itself is tested.
    expect(new Set([...expected.keys()].map((k) => k.split('|')[0])).size).toBeGreaterThanOrEqual(4);
    expectGroups(rows, expected);
  });

  it('location_monthly_ratings: the same per location of the reviewed professional', async () => {
    const rows = await monthly('location_monthly_ratings', 'location_id');
    // Reviews naming no professional and those whose professional has no location share the null group.
    const expected = groupBy(visible, (r) =>
      r.professional.id === null ? null : String(locationOf.get(r.professional.id) ?? ''),
    );
    expectGroups(rows, expected);
  });

  it("README's example queries run on the mirror and answer with rows", async () => {
    const queries = readmeQueries();
    expect(queries.length).toBeGreaterThanOrEqual(3);
    const views = [
      'current_reviews',
      'professional_monthly_ratings',
      'location_monthly_ratings',
      'freshness',
    ];
    const named = new Set<string>();
    for (const query of queries) {
      for (const v of views) if (query.includes(`review_mirror.${v}`)) named.add(v);
      // As an operator runs them, on this test's schema instead of the default one.
      const sql = query.replaceAll('review_mirror.', `"${mirror.db.schema}".`);
      const result = await mirror.db.knex.raw(sql);
      expect(result.rows.length, query).toBeGreaterThan(0);
    }
    // Every view README documents is used by one of its examples, or named in its table.
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    for (const v of views) expect(readme).toContain(`| \`${v}\` |`);
    expect(named.size).toBeGreaterThanOrEqual(3);
  });

  it('freshness: the newest review and the last complete walk of every walk job', async () => {
    const rows = await view('freshness').orderBy('job');
    expect(rows.map((r) => r.job)).toEqual(['locations', 'professionals', 'reviews', 'reviews:reconcile']);
    const truth = await mirror.sandbox.control.truth(mirror.sandbox.companyId);
    const newest = Math.max(...truth.reviews.map((r) => Date.parse(r.created_at)));
    const runs = await mirror.db.knex(mirror.db.table('sync_runs')).where('outcome', 'success');
    for (const row of rows) {
      expect(new Date(row.newest_review_at).getTime()).toBe(newest);
      const finished = runs.filter((r) => r.job === row.job).map((r) => new Date(r.finished_at).getTime());
      expect(new Date(row.last_complete_walk_at).getTime()).toBe(Math.max(...finished));
    }
    const ages = await mirror.db.knex.raw(
      `select extract(epoch from newest_review_age) as newest, extract(epoch from last_complete_walk_age) as walk from ??`,
      [mirror.db.table('freshness')],
    );
    for (const r of ages.rows) {
      expect(Number(r.newest)).toBeGreaterThan(0);
      expect(Number(r.walk)).toBeGreaterThanOrEqual(0);
    }
  });
});
