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

/** Half an emoji: what a truncation leaves of 😀 (U+1F600, `\ud83d\ude00`) cut in two. */
const HIGH_HALF = '\ud83d';
const LOW_HALF = '\ude00';
const HALF_CHARACTER_SLUG =
  'slug: holds half of a character (a lone UTF-16 surrogate), which cannot be stored: a slug names its record in URLs, and must be kept as sent';

/**
 * Slugs holding half a character, which no URL can name (encodeURIComponent throws on them), over
 * real HTTP, on listings of two pages: the record is quarantined and the rest of both pages is
 * mirrored, instead of the job failing on it on every run.
 */
describe('directory records whose slug holds half a character', () => {
  const PAGE_SIZE = 3;
  const locations: Json[] = [
    location(1),
    location(2, { slug: `loc-2${LOW_HALF}` }),
    location(3),
    location(4),
  ];
  const professionals: Json[] = [
    professional(1),
    professional(2, { slug: `ana-${HIGH_HALF}` }),
    professional(3),
    professional(4),
    professional(5),
  ];
  // Listed with a whole slug, but its single read (for location_id) answers with half a character.
  const halfInDetail = professional(6);
  professionals.push(halfInDetail);
  const singleReads: string[] = [];

  /** `records` PAGE_SIZE a page, the cursor being the index of the page's first record. */
  const paged = (key: string, records: readonly Json[], cursor: string | null) => {
    const start = cursor === null ? 0 : Number(cursor);
    const page = records.slice(start, start + PAGE_SIZE);
    const more = start + PAGE_SIZE < records.length;
    // JSON.stringify writes each lone surrogate as its escape (`"ana-\ud83d"`), as a platform would.
    return {
      status: 200,
      body: {
        [key]: page,
        pagination: {
          count: page.length,
          has_more: more,
          next_cursor: more ? String(start + PAGE_SIZE) : null,
        },
      },
    };
  };

  const fx = fakePlatformFixture(
    ({ path, query }) => {
      const active = query.get('active') === 'true';
      const cursor = query.get('cursor');
      if (path === '/locations') return paged('locations', active ? locations : [], cursor);
      if (path === '/professionals') return paged('professionals', active ? professionals : [], cursor);
      singleReads.push(path);
      const slug = /^\/professionals\/(.+)$/.exec(path)?.[1];
      const found = professionals.find((p) => p.slug === slug);
      if (found === undefined) return { status: 404, body: { error: 'not found' } };
      const detail = found === halfInDetail ? { ...found, slug: `pro-6${HIGH_HALF}` } : found;
      return { status: 200, body: { ...detail, location_id: 1 } };
    },
    { pageSize: PAGE_SIZE },
  );

  const ctx = () => pullContext(fx.db, fx.api);
  const quarantined = (resource: string) =>
    fx.db
      .knex(fx.db.table('directory_quarantine'))
      .where({ resource })
      .orderBy('id')
      .select('record_id', 'reason', 'seen_count', 'raw');

  it('quarantines a location whose slug holds half a character and stores the rest of both pages', async () => {
    for (const attempt of [1, 2]) {
      const run = await runJob(
        { db: fx.db, log: quietLog },
        { name: JOB.locations, run: (c, s) => syncLocations(ctx(), c, s) },
        { wait: false },
      );
      expect(run.outcome).toBe('success');
      expect(run.counts).toMatchObject({ fetched: 3, quarantined: 1, removed: 0 });
      expect(await quarantined('locations')).toEqual([
        {
          record_id: '2',
          reason: HALF_CHARACTER_SLUG,
          seen_count: attempt,
          // Kept as sent, but for the half character, which jsonb cannot hold either.
          raw: { ...location(2), slug: 'loc-2\uFFFD' },
        },
      ]);
    }
    const stored = await fx.db.knex(fx.db.table('locations')).orderBy('id').select('id', 'slug');
    expect(stored).toEqual([
      { id: 1, slug: 'loc-1' },
      { id: 3, slug: 'loc-3' },
      { id: 4, slug: 'loc-4' },
    ]);
  });

  it('quarantines such a professional, listed or read, and stores the others of its page and the next', async () => {
    for (const attempt of [1, 2]) {
      singleReads.length = 0;
      const run = await runJob(
        { db: fx.db, log: quietLog },
        // A full run: every listed professional needs its single read, the one the slug broke.
        { name: JOB.professionals, run: (c, s) => syncProfessionals(ctx(), c, { full: true }, s) },
        { wait: false },
      );
      expect(run.outcome).toBe('success');
      expect(run.counts).toMatchObject({ fetched: 5, details: 4, quarantined: 2, removed: 0 });
      // No read was asked for by the half slug: only the five whole ones were read.
      expect(singleReads.sort()).toEqual(
        ['pro-1', 'pro-3', 'pro-4', 'pro-5', 'pro-6'].map((s) => `/professionals/${s}`),
      );
      const rows = await quarantined('professionals');
      expect(rows.map(({ raw: _, ...row }) => row)).toEqual([
        { record_id: professionals[1]!.id, reason: HALF_CHARACTER_SLUG, seen_count: attempt },
        { record_id: halfInDetail.id, reason: HALF_CHARACTER_SLUG, seen_count: attempt },
      ]);
      expect(rows[0]!.raw).toEqual({ ...professionals[1], slug: 'ana-\uFFFD' });
    }
    const stored = await fx.db
      .knex(fx.db.table('professionals'))
      .orderBy('slug')
      .select('slug', 'location_id', 'removed_at');
    // pro-6's listed fields are stored under its listed slug; its location_id is read again next run.
    expect(stored).toEqual([
      { slug: 'pro-1', location_id: 1, removed_at: null },
      { slug: 'pro-3', location_id: 1, removed_at: null },
      { slug: 'pro-4', location_id: 1, removed_at: null },
      { slug: 'pro-5', location_id: 1, removed_at: null },
      { slug: 'pro-6', location_id: null, removed_at: null },
    ]);
  });
});
