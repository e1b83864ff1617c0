import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { syncLocations, syncProfessionals } from '../../src/pull/syncDirectory.js';
import { fakePlatformFixture, pullContext } from './helpers.js';

type Json = Record<string, unknown>;

const location: Json = {
  id: 7,
  slug: 'downtown',
  name: 'Downtown',
  active: true,
  address: { line1: 'Main St 1', line2: null, city: 'Cork', state: null, zip: null },
  profile_url: 'https://example.test/l/downtown',
  default_survey_url: null,
  created_at: '2026-01-01T10:00:00Z',
};

const professional: Json = {
  id: randomUUID(),
  slug: 'pro-1',
  first_name: 'First',
  last_name: 'Last',
  active: true,
  profile_url: 'https://example.test/p/1',
  default_survey_url: null,
  created_at: '2026-01-01T10:00:00Z',
};

const listing = (key: string, records: readonly Json[]) => ({
  status: 200,
  body: { [key]: records, pagination: { count: records.length, has_more: false, next_cursor: null } },
});

/**
 * A single read by slug answered `200 {"error": …}`: no record, and not the spec's not-found (a
 * 404). It is neither quarantined as if it were the record nor taken for proof of removal.
 */
describe('a single directory read answered with an error object', () => {
  let listed = true;
  let single: { status: number; body: unknown } = { status: 200, body: { error: 'Location not found' } };

  const fx = fakePlatformFixture(({ path, query }) => {
    const active = query.get('active') === 'true';
    if (path === '/locations') return listing('locations', listed && active ? [location] : []);
    if (path === '/locations/downtown') return single;
    if (path === '/professionals') return listing('professionals', active ? [professional] : []);
    if (path === '/professionals/pro-1') return { status: 200, body: { error: 'try again later' } };
    return { status: 404, body: { error: 'not found' } };
  });

  const quarantine = () => fx.db.knex(fx.db.table('directory_quarantine')).select('record_id', 'seen_count');
  const stored = () => fx.db.knex(fx.db.table('locations')).where({ id: 7 }).first();

  it('keeps an unlisted location whose read answers so, without quarantining the answer, run after run', async () => {
    await syncLocations(pullContext(fx.db, fx.api), {});
    listed = false;
    for (let run = 0; run < 2; run++) {
      const counts: Record<string, number> = {};
      await syncLocations(pullContext(fx.db, fx.api), counts);
      expect(counts).toMatchObject({ unconfirmed: 1, removed: 0 });
      expect(counts.quarantined).toBeUndefined();
      expect(await quarantine()).toEqual([]);
      expect((await stored()).removed_at).toBeNull();
    }
  });

  it('marks it removed once the read answers the spec not-found, a 404', async () => {
    single = { status: 404, body: { error: 'Location not found' } };
    const counts: Record<string, number> = {};
    await syncLocations(pullContext(fx.db, fx.api), counts);
    expect(counts).toMatchObject({ removed: 1 });
    expect((await stored()).removed_at).not.toBeNull();
    expect(await quarantine()).toEqual([]);
  });

  it('stores a listed professional whose detail read answers so, without its location_id and without quarantine', async () => {
    const counts: Record<string, number> = {};
    await syncProfessionals(pullContext(fx.db, fx.api), counts, { full: false });
    expect(counts).toMatchObject({ fetched: 1, details: 0 });
    expect(counts.quarantined).toBeUndefined();
    const row = await fx.db.knex(fx.db.table('professionals')).where({ slug: 'pro-1' }).first();
    expect(row).toMatchObject({ id: professional.id, location_id: null, removed_at: null });
    expect(await quarantine()).toEqual([]);
  });
});
