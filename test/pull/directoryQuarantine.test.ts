import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { JOB } from '../../src/jobs/jobNames.js';
import { runJob } from '../../src/jobs/runner.js';
import { makeMetrics } from '../../src/metrics.js';
import { ApiSchemaError } from '../../src/partner-api/errors.js';
import { syncLocations, syncProfessionals } from '../../src/pull/syncDirectory.js';
import { formatStatus, readStatus } from '../../src/status/report.js';
import { quietLog } from '../helpers/log.js';
import { fakePlatformFixture, pullContext } from './helpers.js';

type Json = Record<string, unknown>;

const location = (id: number, over: Json = {}): Json => ({
  id,
  slug: `loc-${id}`,
  name: `Location ${id}`,
  active: true,
  address: { line1: null, line2: null, city: 'Cork', state: null, zip: null },
  profile_url: `https://example.test/l/${id}`,
  default_survey_url: null,
  created_at: '2026-01-01T10:00:00Z',
  ...over,
});

const professional = (n: number, over: Json = {}): Json => ({
  id: randomUUID(),
  slug: `pro-${n}`,
  first_name: `First ${n}`,
  last_name: `Last ${n}`,
  active: true,
  profile_url: `https://example.test/p/${n}`,
  default_survey_url: null,
  created_at: '2026-01-01T10:00:00Z',
  ...over,
});

const listing = (key: string, records: readonly Json[]) => ({
  status: 200,
  body: { [key]: records, pagination: { count: records.length, has_more: false, next_cursor: null } },
});

/** The directory listings carrying records that fail the schema, over real HTTP. */
describe('directory listings with invalid records', () => {
  const metrics = makeMetrics();
  let locations: Json[] = [
    location(1),
    location(2, { name: 'Nul\u0000 here' }),
    // Valid ISO 8601 that PostgreSQL cannot store.
    location(3, { created_at: '0000-06-01T00:00:00Z' }),
    // Past the 32-bit id the mirror (and the spec's examples) use.
    location(2 ** 31),
    location(5),
    location(6),
    location(7),
    location(8),
    location(9),
  ];
  let professionals: Json[] = [professional(1), professional(2, { first_name: null }), professional(3)];
  // The single reads, by slug: what a location reads as once unlisted, and each professional's
  // location_id (pro-3's past 32 bits).
  const singleLocations = new Map<string, Json>();
  const locationIdOf = (slug: unknown) => (slug === 'pro-3' ? 2 ** 31 : 1);

  const fx = fakePlatformFixture(({ path, query }) => {
    const active = query.get('active') === 'true';
    if (path === '/locations') return listing('locations', active ? locations : []);
    if (path === '/professionals') return listing('professionals', active ? professionals : []);
    const single = /^\/(locations|professionals)\/(.+)$/.exec(path);
    const found =
      single?.[1] === 'locations'
        ? singleLocations.get(single[2]!)
        : professionals.find((p) => p.slug === single?.[2]);
    if (found === undefined) return { status: 404, body: { error: 'not found' } };
    return {
      status: 200,
      body: single?.[1] === 'locations' ? found : { ...found, location_id: locationIdOf(found.slug) },
    };
  });

  const ctx = () => pullContext(fx.db, fx.api, { metrics });
  const syncLocationsJob = () =>
    runJob(
      { db: fx.db, log: quietLog, metrics },
      { name: JOB.locations, run: (c, s) => syncLocations(ctx(), c, s) },
      { wait: false },
    );
  const syncProfessionalsJob = () =>
    runJob(
      { db: fx.db, log: quietLog, metrics },
      { name: JOB.professionals, run: (c, s) => syncProfessionals(ctx(), c, { full: false }, s) },
      { wait: false },
    );
  const quarantine = () =>
    fx.db
      .knex(fx.db.table('directory_quarantine'))
      .orderBy('id')
      .select('resource', 'record_id', 'reason', 'seen_count');

  it('stores the valid locations, quarantines the rest with their reason, and makes text storable', async () => {
    const run = await syncLocationsJob();
    expect(run.outcome).toBe('success');
    expect(run.counts).toMatchObject({ fetched: 7, quarantined: 2 });
    const stored = await fx.db
      .knex(fx.db.table('locations'))
      .orderBy('id')
      .select('id', 'name', 'removed_at');
    expect(stored).toEqual([
      { id: 1, name: 'Location 1', removed_at: null },
      { id: 2, name: 'Nul\uFFFD here', removed_at: null },
      { id: 5, name: 'Location 5', removed_at: null },
      { id: 6, name: 'Location 6', removed_at: null },
      { id: 7, name: 'Location 7', removed_at: null },
      { id: 8, name: 'Location 8', removed_at: null },
      { id: 9, name: 'Location 9', removed_at: null },
    ]);
    expect(await quarantine()).toEqual([
      {
        resource: 'locations',
        record_id: '3',
        reason: expect.stringMatching(/^created_at: must be a timestamp PostgreSQL can store/),
        seen_count: 1,
      },
      {
        resource: 'locations',
        record_id: String(2 ** 31),
        reason: expect.stringMatching(/^id: /),
        seen_count: 1,
      },
    ]);
    expect(await metrics.registry.metrics()).toContain(
      'review_mirror_directory_records_quarantined_total{resource="locations"} 2',
    );
    const report = await readStatus(fx.db);
    expect(report.directory_quarantine).toMatchObject({ records: 2 });
    expect(formatStatus(report)).toContain('quarantined    2 invalid location or professional records');
  });

  it('keeps the last valid version of a stored location whose listing turns invalid, never marking it removed', async () => {
    locations = locations.map((l) => (l.id === 1 ? { ...l, name: 'Renamed', created_at: 'yesterday' } : l));
    const run = await syncLocationsJob();
    expect(run.outcome).toBe('success');
    expect(run.counts).toMatchObject({ fetched: 6, quarantined: 3, removed: 0 });
    const first = await fx.db.knex(fx.db.table('locations')).where({ id: 1 }).first();
    expect(first).toMatchObject({ name: 'Location 1', removed_at: null });
    const rows = await quarantine();
    // The records quarantined before were seen again, not added again.
    expect(rows.map((r) => [r.record_id, r.seen_count])).toEqual([
      ['3', 2],
      [String(2 ** 31), 2],
      ['1', 1],
    ]);
    expect(await metrics.registry.metrics()).toContain(
      'review_mirror_directory_records_quarantined_total{resource="locations"} 3',
    );
  });

  it('reads an unlisted location by its slug: kept and quarantined when that read is invalid, else removed', async () => {
    // Location 5 leaves the listings but still reads, invalid; location 6 is gone.
    singleLocations.set('loc-5', location(5, { created_at: 'soon' }));
    locations = locations.filter((l) => l.id !== 5 && l.id !== 6);
    const run = await syncLocationsJob();
    expect(run.outcome).toBe('success');
    expect(run.counts).toMatchObject({ removed: 1 });
    const rows = await fx.db.knex(fx.db.table('locations')).whereIn('id', [5, 6]).orderBy('id');
    expect(rows.map((r) => [r.id, r.removed_at === null])).toEqual([
      [5, true],
      [6, false],
    ]);
    expect((await quarantine()).at(-1)).toMatchObject({
      record_id: '5',
      reason: expect.stringMatching(/^created_at: /),
    });
  });

  it('does the same for professionals: the valid ones stored, the invalid listing and single read quarantined', async () => {
    const run = await syncProfessionalsJob();
    expect(run.outcome).toBe('success');
    expect(run.counts).toMatchObject({ fetched: 2, details: 1, quarantined: 2 });
    const stored = await fx.db
      .knex(fx.db.table('professionals'))
      .orderBy('slug')
      .select('slug', 'location_id');
    // pro-3's listed fields are stored; its location_id is read again next run.
    expect(stored).toEqual([
      { slug: 'pro-1', location_id: 1 },
      { slug: 'pro-3', location_id: null },
    ]);
    const [row, detail] = await fx.db
      .knex(fx.db.table('directory_quarantine'))
      .where({ resource: 'professionals' })
      .orderBy('id');
    expect(row).toMatchObject({
      record_id: professionals[1]!.id,
      reason: expect.stringMatching(/^first_name: /),
    });
    expect(detail).toMatchObject({
      record_id: professionals[2]!.id,
      reason: expect.stringMatching(/^location_id: /),
    });
    expect(row.raw).toEqual(professionals[1]);
  });

  it('stops loudly when most of a listing fails, marking nothing removed: a format change', async () => {
    const before = professionals;
    // More than half of a full page (100): fewer would be quarantined, as bad records of a short page.
    professionals = [...professionals, ...Array.from({ length: 60 }, (_, i) => professional(100 + i))].map(
      (p) => ({ ...p, active: 'yes' }),
    );
    const error = await syncProfessionalsJob().then(
      () => undefined,
      (e: unknown) => e,
    );
    professionals = before;
    expect(error).toBeInstanceOf(ApiSchemaError);
    expect((error as Error).message).toMatch(/most of the page fails the schema/);
    const removed = await fx.db
      .knex(fx.db.table('professionals'))
      .whereNotNull('removed_at')
      .count({ n: '*' });
    expect(Number(removed[0]!.n)).toBe(0);
  });
});
