import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { RetryableError } from '../../src/errors.js';
import { JOB } from '../../src/jobs/jobNames.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { runJob } from '../../src/jobs/runner.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { directoryIdText } from '../../src/mirror/directorySql.js';
import { ApiAuthError, ApiUnavailableError } from '../../src/partner-api/errors.js';
import { mapBounded } from '../../src/pull/mapBounded.js';
import { syncLocations, syncProfessionals } from '../../src/pull/syncDirectory.js';
import type { FakeAnswer } from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';
import { fakePlatformFixture, pullContext } from './helpers.js';

type Json = Record<string, unknown>;

const API_KEY = 'rm_test_key_123456';

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

const listing = (key: string, records: readonly Json[]): FakeAnswer => ({
  status: 200,
  body: { [key]: records, pagination: { count: records.length, has_more: false, next_cursor: null } },
});

const NOT_FOUND: FakeAnswer = { status: 404, body: { error: 'not found' } };

/** A logger whose lines the test reads back. */
function capturedLog() {
  const lines: Json[] = [];
  const log = makeLogger({
    level: 'info',
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
  return { log, lines, failedReads };
}

/**
 * F4: single reads of professionals that fail for one record (a 500 past its retries, a 400, a
 * 403 while the key is accepted) over real HTTP: that record keeps its listed data, is not marked
 * removed and is read again next run; the others are stored; failures that are not the record's
 * still fail the run.
 */
describe('a professional whose single read fails for that record alone', () => {
  const pros = Array.from({ length: 6 }, (_, i) => professional(i + 1));
  // What each professional's single read answers instead of its record, by slug.
  const failing = new Map<string, FakeAnswer>();
  let listed = pros;
  const locationIdOf = (slug: string) => Number(slug.replace('pro-', '')) * 10;

  const fx = fakePlatformFixture(({ path, query }) => {
    const active = query.get('active') === 'true';
    // The transport's check of the key after a 403: a 2xx says the key is good.
    if (path === '/reviews') {
      return {
        status: 200,
        body: { reviews: [], pagination: { count: 0, has_more: false, next_cursor: null } },
      };
    }
    if (path === '/professionals') return listing('professionals', active ? listed : []);
    const slug = /^\/professionals\/(.+)$/.exec(path)?.[1];
    if (slug === undefined) return NOT_FOUND;
    const answer = failing.get(slug);
    if (answer !== undefined) return answer;
    const found = pros.find((p) => p.slug === slug);
    return found === undefined
      ? NOT_FOUND
      : { status: 200, body: { ...found, location_id: locationIdOf(slug) } };
  });

  const { log, lines, failedReads } = capturedLog();
  const run = (options: { full?: boolean; detailConcurrency?: number } = {}) =>
    runJob(
      { db: fx.db, log: quietLog },
      {
        name: JOB.professionals,
        run: (c, s) =>
          syncProfessionals(
            pullContext(fx.db, fx.api, { log, detailConcurrency: options.detailConcurrency ?? 4 }),
            c,
            { full: !!options.full },
            s,
          ),
      },
      { wait: true },
    );
  /** The run's error when it fails, else undefined. */
  const failure = (running: Promise<unknown>) =>
    running.then(
      () => undefined,
      (e: unknown) => e,
    );
  const rows = async () =>
    new Map(
      (
        await fx.db
          .knex(fx.db.table('professionals'))
          .select('slug', 'last_name', 'location_id', 'detail_fetched_at', 'removed_at')
      ).map((r) => [r.slug as string, r]),
    );
  const lastRun = () =>
    fx.db.knex(fx.db.table('sync_runs')).where({ job: JOB.professionals }).orderBy('id', 'desc').first();

  it('stores the others, and the failing ones with their listed data, not removed', async () => {
    failing.set('pro-1', { status: 500, body: { error: 'internal error' } });
    // The platform quoting the key back: never in a log line or a stored error.
    failing.set('pro-3', { status: 400, body: { error: `bad request for key ${API_KEY}` } });
    failing.set('pro-5', { status: 403, body: { error: 'this professional is not yours to read' } });
    lines.length = 0;
    const result = await run();
    expect(result.outcome).toBe('success');
    expect(result.counts).toMatchObject({ fetched: 6, details: 3, details_failed: 3, removed: 0 });
    const stored = await rows();
    expect(stored.size).toBe(6);
    for (const slug of ['pro-2', 'pro-4', 'pro-6']) {
      expect(stored.get(slug)).toMatchObject({ location_id: locationIdOf(slug), removed_at: null });
    }
    for (const slug of ['pro-1', 'pro-3', 'pro-5']) {
      expect(stored.get(slug)).toMatchObject({
        last_name: `Last ${slug.slice(4)}`,
        location_id: null,
        detail_fetched_at: null,
        removed_at: null,
      });
    }
    const warned = failedReads();
    expect(warned).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          resource: 'professionals',
          slug: 'pro-1',
          recordId: pros[0]!.id,
          platformError: expect.stringMatching(/answered 500/),
        }),
        expect.objectContaining({
          slug: 'pro-3',
          platformError: expect.stringMatching(/answered 400: bad request/),
        }),
        expect.objectContaining({ slug: 'pro-5', platformError: expect.stringMatching(/answered 403/) }),
      ]),
    );
    expect(warned).toHaveLength(3);
    expect(JSON.stringify(lines)).not.toContain(API_KEY);
    expect(await lastRun()).toMatchObject({ error_kind: null });
  });

  it('reads them again on the next run, once the platform answers', async () => {
    failing.clear();
    const result = await run();
    expect(result.outcome).toBe('success');
    // Only the three never read: the others' reads are fresh.
    expect(result.counts).toMatchObject({ fetched: 6, details: 3, removed: 0 });
    expect(result.counts.details_failed).toBeUndefined();
    const stored = await rows();
    for (const [slug, row] of stored) {
      expect(row).toMatchObject({ location_id: locationIdOf(slug), removed_at: null });
      expect(row.detail_fetched_at).not.toBeNull();
    }
  });

  it('keeps the location_id a failing record had, and takes its new listed fields', async () => {
    pros[0]!.last_name = 'Renamed';
    failing.set('pro-1', { status: 500, body: { error: 'internal error' } });
    const result = await run({ full: true });
    expect(result.outcome).toBe('success');
    expect(result.counts).toMatchObject({ details: 5, details_failed: 1, removed: 0 });
    expect((await rows()).get('pro-1')).toMatchObject({
      last_name: 'Renamed',
      location_id: locationIdOf('pro-1'),
      removed_at: null,
    });
    failing.clear();
  });

  it('does not mark an unlisted record removed while its re-read fails, and does once it answers 404', async () => {
    listed = pros.filter((p) => p.slug !== 'pro-6');
    for (const answer of [
      { status: 500, body: { error: 'internal error' } },
      { status: 400, body: { error: 'bad slug' } },
    ]) {
      failing.set('pro-6', answer);
      const result = await run();
      expect(result.outcome).toBe('success');
      expect(result.counts).toMatchObject({ unconfirmed: 1, removed: 0 });
      expect((await rows()).get('pro-6')).toMatchObject({ removed_at: null });
    }
    failing.set('pro-6', NOT_FOUND);
    const result = await run();
    expect(result.counts).toMatchObject({ removed: 1 });
    expect((await rows()).get('pro-6')?.removed_at).not.toBeNull();
    failing.clear();
    listed = pros;
  });

  it('fails the run on a refused key, a 429 or a lost answer, marking nothing removed', async () => {
    const before = await rows();
    const cases: Array<{ answer: FakeAnswer; error: unknown; kind: string }> = [
      // A refused key (spec 5): the key's failure, not the record's. (A 403 counts as the key's
      // only while the transport's check of the key fails; a yes stands for a while, see http.ts.)
      { answer: { status: 401, body: { error: 'invalid key' } }, error: ApiAuthError, kind: 'fatal' },
      {
        answer: { status: 429, body: { error: 'slow down' } },
        error: ApiUnavailableError,
        kind: 'retryable',
      },
      // The connection drops mid-body: no answer, no status.
      {
        answer: { status: 200, body: { ...pros[1], location_id: 20 }, cutAfter: 10 },
        error: ApiUnavailableError,
        kind: 'retryable',
      },
    ];
    listed = pros.filter((p) => p.slug !== 'pro-4'); // a removal the failed run must not make
    for (const { answer, error, kind } of cases) {
      failing.set('pro-2', answer);
      expect(await failure(run({ full: true }))).toBeInstanceOf(error);
      expect(await lastRun()).toMatchObject({ error_kind: kind });
      const after = await rows();
      for (const [slug, row] of after) expect(row.removed_at).toEqual(before.get(slug)!.removed_at);
    }
    failing.clear();
    listed = pros;
  });

  it('fails the run as retryable when the single read fails for every record, storing the listings', async () => {
    pros[1]!.last_name = 'Listed while down';
    listed = pros.filter((p) => p.slug !== 'pro-4');
    for (const p of pros) failing.set(p.slug as string, { status: 503, body: { error: 'unavailable' } });
    // One read at a time: the three first fail in a row, and the rest are not even asked.
    const error = await failure(run({ full: true, detailConcurrency: 1 }));
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toMatch(/failed for \d+ records in a row/);
    const runRow = await lastRun();
    expect(runRow).toMatchObject({ error_kind: 'retryable' });
    const counts = (
      typeof runRow.counts === 'string' ? JSON.parse(runRow.counts) : runRow.counts
    ) as RunCounts;
    // The three, then a probe of a record read before, failing too; then the rest not asked.
    expect(counts).toMatchObject({ details_failed: 3, reads_probed: 1, reads_skipped: 2 });
    expect(counts.removed).toBeUndefined();
    const stored = await rows();
    expect(stored.get('pro-2')).toMatchObject({ last_name: 'Listed while down', location_id: 20 });
    // Unlisted, and not confirmable: not removed by a run that could not read.
    expect(stored.get('pro-4')).toMatchObject({ removed_at: null });
    failing.clear();
    listed = pros;
  });
});

/**
 * Three records whose single reads the platform always refuses, new since the last run: every
 * incremental run reads them, and only them, three failures in a row. Taking that for a single
 * read that is down failed every run on them; the run now reads a record it read before, and
 * goes on when that one answers.
 */
describe('three records whose single reads always fail', () => {
  const pros = Array.from({ length: 4 }, (_, i) => professional(i + 1));
  const bad = [7, 8, 9].map((n) => professional(n));
  let listed = pros;
  const failing = new Map<string, FakeAnswer>();
  // Single reads asked for, by slug, in order.
  const asked: string[] = [];

  const fx = fakePlatformFixture(({ path, query }) => {
    if (path === '/professionals')
      return listing('professionals', query.get('active') === 'true' ? listed : []);
    const slug = /^\/professionals\/(.+)$/.exec(path)?.[1];
    if (slug === undefined) return NOT_FOUND;
    asked.push(slug);
    const found = [...pros, ...bad].find((p) => p.slug === slug);
    return (
      failing.get(slug) ??
      (found === undefined ? NOT_FOUND : { status: 200, body: { ...found, location_id: 7 } })
    );
  });

  const run = (full = false) =>
    runJob(
      { db: fx.db, log: quietLog },
      {
        name: JOB.professionals,
        run: (c, s) =>
          syncProfessionals(pullContext(fx.db, fx.api, { detailConcurrency: 1 }), c, { full }, s),
      },
      { wait: true },
    ).then(
      (result) => result,
      (error: unknown) => error,
    );

  // Each slug once, in the order first asked (the transport retries a 500).
  const distinctAsked = () => [...new Set(asked)];

  it('does not fail the incremental runs that read only them, once a record read before answers', async () => {
    expect(await run()).toMatchObject({ outcome: 'success', counts: { details: 4 } });
    listed = [...pros, ...bad];
    for (const p of bad) failing.set(p.slug as string, { status: 500, body: { error: 'internal error' } });
    for (let i = 0; i < 2; i++) {
      asked.length = 0;
      const result = await run();
      expect(result).toMatchObject({
        outcome: 'success',
        counts: { fetched: 7, details_failed: 3, reads_probed: 1, removed: 0 },
      });
      // The three, then one record whose read succeeded before: never one of the three.
      const slugs = distinctAsked();
      expect(slugs.slice(0, 3).sort()).toEqual(['pro-7', 'pro-8', 'pro-9']);
      expect(slugs).toHaveLength(4);
      expect(pros.map((p) => p.slug)).toContain(slugs[3]);
    }
    const unread = await fx.db
      .knex(fx.db.table('professionals'))
      .whereNull('detail_fetched_at')
      .orderBy('slug')
      .pluck('slug');
    expect(unread).toEqual(['pro-7', 'pro-8', 'pro-9']);
  });

  it('still fails the run when the record read before fails too, or when there is none to read', async () => {
    for (const p of pros) failing.set(p.slug as string, { status: 500, body: { error: 'internal error' } });
    const error = await run();
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as Error).message).toMatch(
      /failed for 3 records in a row, none read between them, and for a record known to exist/,
    );
    // A mirror holding no record read before has none to try: three failures are enough.
    await fx.db.knex(fx.db.table('professionals')).delete();
    listed = bad;
    asked.length = 0;
    const none = await run();
    expect(none).toBeInstanceOf(RetryableError);
    expect((none as Error).message).toMatch(
      /failed for 3 records in a row, none read between them, and no record known to exist to try/,
    );
    expect(distinctAsked().sort()).toEqual(['pro-7', 'pro-8', 'pro-9']);
  });
});

/**
 * The same for locations, whose single read confirms a record missing from the listings: three
 * unlisted locations whose reads fail are kept, unconfirmed, when a listed location reads well,
 * and fail the run when none does.
 */
describe('three unlisted locations whose single reads fail', () => {
  let listed = [1, 2, 3, 4, 5].map((id) => location(id));
  const failing = new Map<string, FakeAnswer>();
  const fx = fakePlatformFixture(({ path, query }) => {
    if (path === '/locations') return listing('locations', query.get('active') === 'true' ? listed : []);
    const slug = /^\/locations\/(.+)$/.exec(path)?.[1] ?? '';
    const found = listed.find((l) => l.slug === slug);
    return failing.get(slug) ?? (found === undefined ? NOT_FOUND : { status: 200, body: found });
  });
  const run = () => {
    const counts: RunCounts = {};
    return syncLocations(pullContext(fx.db, fx.api, { detailConcurrency: 1 }), counts).then(
      () => counts,
      (error: unknown) => error,
    );
  };
  const removed = () =>
    fx.db.knex(fx.db.table('locations')).whereNotNull('removed_at').orderBy('id').pluck('id');

  it('keeps them unconfirmed when a listed location reads, and fails the run when it does not', async () => {
    expect(await run()).toMatchObject({ fetched: 5, removed: 0 });
    listed = listed.slice(0, 2);
    for (const slug of ['loc-3', 'loc-4', 'loc-5'])
      failing.set(slug, { status: 500, body: { error: 'internal error' } });
    expect(await run()).toMatchObject({ unconfirmed: 3, reads_probed: 1, removed: 0 });
    expect(await removed()).toEqual([]);

    for (const slug of ['loc-1', 'loc-2'])
      failing.set(slug, { status: 500, body: { error: 'internal error' } });
    expect(await run()).toBeInstanceOf(RetryableError);
    expect(await removed()).toEqual([]);

    failing.clear();
    expect(await run()).toMatchObject({ removed: 3 });
    expect(await removed()).toEqual([3, 4, 5]);
  });
});

/**
 * F5: a platform sending UUIDs in upper case. The mirror stores them in lower case (uuidText);
 * a record quarantined, listed or read by slug, is matched to its stored row in any case, and is
 * not marked removed while it is listed. Location ids (integers) are matched as before.
 */
describe('directory ids sent in upper case', () => {
  const upper = (n: number) => professional(n, { id: randomUUID().toUpperCase() });
  const pros = [upper(1), upper(2), upper(3), upper(4)];
  let listedPros: Json[] = pros;
  // What a single read answers, by slug, when it is not the listed record.
  const singles = new Map<string, FakeAnswer>();
  let locations: Json[] = [location(7), location(8)];
  const singleLocations = new Map<string, FakeAnswer>();

  const fx = fakePlatformFixture(({ path, query }) => {
    const active = query.get('active') === 'true';
    if (path === '/professionals') return listing('professionals', active ? listedPros : []);
    if (path === '/locations') return listing('locations', active ? locations : []);
    const single = /^\/(locations|professionals)\/(.+)$/.exec(path);
    if (single?.[1] === 'locations') return singleLocations.get(single[2]!) ?? NOT_FOUND;
    const slug = single?.[2] ?? '';
    const answer = singles.get(slug);
    if (answer !== undefined) return answer;
    const found = listedPros.find((p) => p.slug === slug);
    return found === undefined ? NOT_FOUND : { status: 200, body: { ...found, location_id: 7 } };
  });

  const runProfessionals = async (full = false) => {
    const counts: RunCounts = {};
    await syncProfessionals(pullContext(fx.db, fx.api), counts, { full });
    return counts;
  };
  const runLocations = async () => {
    const counts: RunCounts = {};
    await syncLocations(pullContext(fx.db, fx.api), counts);
    return counts;
  };
  const removed = async (table: 'professionals' | 'locations') =>
    (await fx.db.knex(fx.db.table(table)).whereNotNull('removed_at').select('slug')).map((r) => r.slug);

  it('stores the ids in lower case', async () => {
    expect(await runProfessionals()).toMatchObject({ fetched: 4, details: 4, removed: 0 });
    const ids = (await fx.db.knex(fx.db.table('professionals')).orderBy('slug').select('id')).map(
      (r) => r.id,
    );
    expect(ids).toEqual(pros.map((p) => String(p.id).toLowerCase()));
  });

  it('marks nothing removed when a listed record is quarantined, nor when an unlisted one reads back invalid', async () => {
    const [, two, three, four] = pros;
    // Listed, and read by slug, with an empty survey URL: quarantined, still listed.
    const invalid = { ...two!, default_survey_url: '' };
    // pro-3 and pro-4 turned active between the two listings: in neither, found by their reads.
    listedPros = [pros[0]!, invalid];
    singles.set('pro-2', { status: 200, body: { ...invalid, location_id: 7 } });
    singles.set('pro-3', { status: 200, body: { ...three!, first_name: null, location_id: 7 } });
    singles.set('pro-4', { status: 200, body: { ...four!, location_id: 7 } });
    const counts = await runProfessionals(true);
    expect(counts).toMatchObject({ removed: 0, confirmed: 1 });
    expect(counts.quarantined).toBeGreaterThanOrEqual(2);
    expect(await removed('professionals')).toEqual([]);
    // The quarantine keeps the id as sent.
    const quarantined = await fx.db
      .knex(fx.db.table('directory_quarantine'))
      .where({ resource: 'professionals' })
      .distinct('record_id');
    expect(quarantined.map((r) => r.record_id).sort()).toEqual([String(two!.id), String(three!.id)].sort());
  });

  it('still marks removed what the platform says is gone', async () => {
    singles.set('pro-3', NOT_FOUND);
    singles.set('pro-4', NOT_FOUND);
    expect(await runProfessionals()).toMatchObject({ removed: 2 });
    expect((await removed('professionals')).sort()).toEqual(['pro-3', 'pro-4']);
  });

  it('matches integer location ids as before: a quarantined location is kept, an unlisted invalid one too', async () => {
    expect(await runLocations()).toMatchObject({ fetched: 2, removed: 0 });
    locations = [location(7, { name: null })];
    singleLocations.set('loc-8', { status: 200, body: location(8, { created_at: 'yesterday' }) });
    expect(await runLocations()).toMatchObject({ removed: 0, quarantined: 2 });
    expect(await removed('locations')).toEqual([]);
    singleLocations.clear();
    expect(await runLocations()).toMatchObject({ removed: 1 });
    expect(await removed('locations')).toEqual(['loc-8']);
  });
});

describe('directoryIdText', () => {
  it('lower-cases a UUID and leaves any other id as it is', () => {
    expect(directoryIdText('0A1B2C3D-4E5F-6A7B-8C9D-0E1F2A3B4C5D')).toBe(
      '0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d',
    );
    expect(directoryIdText(7)).toBe('7');
    expect(directoryIdText('ABC')).toBe('ABC');
  });
});

describe('mapBounded', () => {
  it('starts nothing after a failure, waits for the calls in flight, then throws the first error', async () => {
    const started: number[] = [];
    let settled = 0;
    const error = await mapBounded([0, 1, 2, 3, 4, 5, 6, 7], 2, async (i) => {
      started.push(i);
      await new Promise((resolve) => setTimeout(resolve, i === 0 ? 5 : 20));
      settled++;
      if (i === 0) throw new Error('first');
      return i;
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as Error).message).toBe('first');
    expect(started).toEqual([0, 1]);
    expect(settled).toBe(2);
  });

  it('keeps the input order', async () => {
    expect(
      await mapBounded([30, 10, 20], 3, async (ms) => {
        await new Promise((resolve) => setTimeout(resolve, ms));
        return ms;
      }),
    ).toEqual([30, 10, 20]);
  });
});
