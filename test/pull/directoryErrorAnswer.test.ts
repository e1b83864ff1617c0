import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { readDirectoryRecord } from '../../src/partner-api/directoryPages.js';
import type { HttpClient } from '../../src/partner-api/http.js';
import { locationSchema } from '../../src/partner-api/locationsSchema.js';
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

/**
 * A single read by slug answered 200 with an HTML page (a login page, a proxy's): no record, so a
 * failed read of that record, as above, and never one quarantine row that names nothing.
 */
describe('a single directory read answered 200 with a body that is not JSON', () => {
  const html = { status: 200, body: '<!doctype html><html><body>Please log in</body></html>' };
  let listed = true;
  const fx = fakePlatformFixture(({ path, query }) => {
    const active = query.get('active') === 'true';
    if (path === '/locations') return listing('locations', listed && active ? [location] : []);
    if (path === '/professionals') return listing('professionals', active ? [professional] : []);
    if (path === '/locations/downtown' || path === '/professionals/pro-1') return html;
    return { status: 404, body: { error: 'not found' } };
  });

  const lines: Json[] = [];
  const log = makeLogger({
    level: 'warn',
    scrubber: new SecretScrubber(),
    destination: new Writable({
      write(chunk, _encoding, callback) {
        lines.push(JSON.parse(String(chunk)));
        callback();
      },
    }),
  });
  const failedReads = () =>
    lines.filter((l) => String(l.msg).startsWith('directory record read answered no record'));
  const quarantine = () => fx.db.knex(fx.db.table('directory_quarantine')).select('record_id');

  it('stores the listed professional without its location_id and names it in the warning', async () => {
    const counts: Record<string, number> = {};
    await syncProfessionals(pullContext(fx.db, fx.api, { log }), counts, { full: false });
    expect(counts).toMatchObject({ fetched: 1, details: 0 });
    const row = await fx.db.knex(fx.db.table('professionals')).where({ slug: 'pro-1' }).first();
    expect(row).toMatchObject({ id: professional.id, location_id: null, removed_at: null });
    expect(await quarantine()).toEqual([]);
    expect(failedReads()).toEqual([
      expect.objectContaining({
        resource: 'professionals',
        recordId: professional.id,
        slug: 'pro-1',
        platformError: expect.stringMatching(/^the 200 answer is not the record: .*not JSON/),
      }),
    ]);
  });

  it('keeps an unlisted location whose read answers so, unconfirmed, without a quarantine row', async () => {
    await syncLocations(pullContext(fx.db, fx.api), {});
    listed = false;
    lines.length = 0;
    const counts: Record<string, number> = {};
    await syncLocations(pullContext(fx.db, fx.api, { log }), counts);
    expect(counts).toMatchObject({ unconfirmed: 1, removed: 0 });
    expect((await fx.db.knex(fx.db.table('locations')).where({ id: 7 }).first()).removed_at).toBeNull();
    expect(await quarantine()).toEqual([]);
    expect(failedReads()).toEqual([
      expect.objectContaining({ resource: 'locations', recordId: '7', slug: 'downtown' }),
    ]);
  });

  it('is a failed read too when the transport hands such a body on as none', async () => {
    const http = { request: async () => undefined } as unknown as HttpClient;
    expect(
      await readDirectoryRecord(http, '/locations/downtown', 'GET /locations/:slug', locationSchema),
    ).toEqual({
      failed: 'the 2xx answer is not the record: its body is empty, null or not JSON',
    });
  });

  it('is a failed read, with the platform text, when that text is nested thousands deep', async () => {
    const error = JSON.parse(`{"detail":${'['.repeat(6_000)}"gone"${']'.repeat(6_000)}}`) as unknown;
    const http = { request: async () => ({ error }) } as unknown as HttpClient;
    const read = await readDirectoryRecord(
      http,
      '/locations/downtown',
      'GET /locations/:slug',
      locationSchema,
    );
    expect(read).toEqual({ failed: expect.stringContaining('"detail"') });
  });
});
