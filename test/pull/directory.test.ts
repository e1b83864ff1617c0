import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { runJob } from '../../src/jobs/runner.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { locationSchema } from '../../src/partner-api/locationsSchema.js';
import { professionalSchema } from '../../src/partner-api/professionalsSchema.js';
import { syncLocations, syncProfessionals } from '../../src/pull/syncDirectory.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { pullContext, testApi, testHttp } from './helpers.js';

describe('locations and professionals', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    // Long enough that the first sync, on a loaded machine too, happens before any survey exists.
    sandbox = await testSandbox({ surveyDelayMs: 3_000 });
    db = await freshDb();
    // Page size 2: the lists span several pages in both the active and the inactive walk.
    api = testApi(sandbox, { pageSize: 2 });
    const locations = [
      { name: 'Downtown Office', address_1: '1 Main St', address_2: 'Suite 4', city: 'Zürich', zip: '8001' },
      { name: 'Harbour', city: 'Cork' },
      { name: 'Old Branch', active: false },
    ];
    const http = testHttp(sandbox);
    const ids: number[] = [];
    for (const body of locations) {
      ids.push((await http.request('POST', '/locations', { body, schema: locationSchema })).id);
    }
    const professionals = [
      { first_name: 'Ana', last_name: 'Núñez', location_id: ids[0] },
      { first_name: 'Ben', last_name: 'Okafor', location_id: ids[1] },
      { first_name: 'Chloé', last_name: 'Martin' },
      { first_name: 'Dev', last_name: 'Patel', location_id: ids[2], active: false },
      { first_name: 'Eve', last_name: 'Smith', active: false },
    ];
    for (const [i, body] of professionals.entries()) {
      await http.request('POST', '/professionals', {
        body: { ...body, email: `pro${i}@example.com` },
        schema: professionalSchema,
      });
    }
    await http.close();
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  const syncBoth = async (full = false) => {
    const ctx = pullContext(db, api, { detailConcurrency: 2 });
    const locations = await runJob(
      { db: db, log: quietLog },
      { name: JOB.locations, run: (c, s) => syncLocations(ctx, c, s) },
      {
        wait: true,
      },
    );
    const professionals = await runJob(
      { db: db, log: quietLog },
      { name: JOB.professionals, run: (c, s) => syncProfessionals(ctx, c, { full }, s) },
      { wait: true },
    );
    return { locations: locations.counts, professionals: professionals.counts };
  };

  const mirrorMatchesTruth = async () => {
    const truth = await sandbox.control.truth(sandbox.companyId);
    const locations = await db.knex(db.table('locations')).whereNull('removed_at').orderBy('id');
    expect(
      locations.map((l) => ({
        id: l.id,
        slug: l.slug,
        name: l.name,
        active: l.active,
        address: {
          line1: l.address_line1,
          line2: l.address_line2,
          city: l.address_city,
          state: l.address_state,
          zip: l.address_zip,
        },
        profile_url: l.profile_url,
        default_survey_url: l.default_survey_url,
        created_at: l.created_at.toISOString(),
      })),
    ).toEqual([...truth.locations].sort((a, b) => a.id - b.id));
    const professionals = await db.knex(db.table('professionals')).whereNull('removed_at').orderBy('id');
    expect(
      professionals.map((p) => ({
        id: p.id,
        slug: p.slug,
        first_name: p.first_name,
        last_name: p.last_name,
        active: p.active,
        location_id: p.location_id,
        profile_url: p.profile_url,
        default_survey_url: p.default_survey_url,
        created_at: p.created_at.toISOString(),
      })),
    ).toEqual(
      truth.professionals
        .map(({ email: _email, ...p }) => p)
        .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
    );
    return { locations: locations.length, professionals: professionals.length };
  };

  it('mirrors active and inactive records with every field, location_id from single reads', async () => {
    const counts = await syncBoth();
    expect(counts.locations).toMatchObject({ fetched: 3, removed: 0 });
    expect(counts.professionals).toMatchObject({ fetched: 5, details: 5, removed: 0 });
    expect(await mirrorMatchesTruth()).toEqual({ locations: 3, professionals: 5 });
    const surveys = await db
      .knex(db.table('professionals'))
      .whereNotNull('default_survey_url')
      .count({ n: '*' });
    expect(Number(surveys[0]!.n)).toBe(0); // not provisioned yet
  });

  it('keeps default_survey_url current once the platform provisions it', async () => {
    await waitFor(async () => {
      const truth = await sandbox.control.truth(sandbox.companyId);
      return [...truth.locations, ...truth.professionals].every((r) => r.default_survey_url !== null);
    });
    await syncBoth();
    await mirrorMatchesTruth();
    const surveys = await db.knex(db.table('locations')).whereNull('default_survey_url').count({ n: '*' });
    expect(Number(surveys[0]!.n)).toBe(0);
  });

  it('reads single records only when something changed, or all of them with --full', async () => {
    expect((await syncBoth()).professionals.details).toBe(0);
    expect((await syncBoth(true)).professionals.details).toBe(5);
    await mirrorMatchesTruth();
  });

  it('keeps a record that turned active between the two listings of a run, found by a single read', async () => {
    await syncBoth(); // the inactive "Old Branch" and "Dev Patel" are mirrored as inactive
    const flipped = (kind: 'locations' | 'professionals', slug: string): PartnerApi => {
      // Between the active and the inactive listing, the record turns active: it is in neither.
      return {
        ...api,
        [kind]: {
          ...api[kind],
          pages: async function* (active: boolean, cursor: string | null, signal?: AbortSignal) {
            if (!active && cursor === null)
              await sandbox.control.setDirectoryActive(sandbox.companyId, kind, slug, true);
            yield* api[kind].pages(active, cursor, signal);
          },
        },
      } as PartnerApi;
    };
    const run = async (racing: PartnerApi, kind: 'locations' | 'professionals') => {
      const ctx = pullContext(db, racing, { detailConcurrency: 2 });
      const body =
        kind === 'locations'
          ? (c: RunCounts, s?: AbortSignal) => syncLocations(ctx, c, s)
          : (c: RunCounts, s?: AbortSignal) => syncProfessionals(ctx, c, { full: false }, s);
      return (await runJob({ db: db, log: quietLog }, { name: kind, run: body }, { wait: true })).counts;
    };
    expect(await run(flipped('locations', 'old-branch'), 'locations')).toMatchObject({
      confirmed: 1,
      removed: 0,
    });
    expect(await run(flipped('professionals', 'dev-patel'), 'professionals')).toMatchObject({
      confirmed: 1,
      removed: 0,
    });
    const location = await db.knex(db.table('locations')).where({ slug: 'old-branch' }).first();
    expect(location).toMatchObject({ active: true, removed_at: null });
    const professional = await db.knex(db.table('professionals')).where({ slug: 'dev-patel' }).first();
    expect(professional).toMatchObject({ active: true, removed_at: null });
    expect(professional.location_id).toBe(location.id);
    await mirrorMatchesTruth();
  });

  it('marks records that disappear as removed', async () => {
    await sandbox.control.reset(); // the company comes back empty, under the same key
    const counts = await syncBoth();
    expect(counts.locations.removed).toBe(3);
    expect(counts.professionals.removed).toBe(5);
    expect(await mirrorMatchesTruth()).toEqual({ locations: 0, professionals: 0 });
    const all = z.array(z.object({ removed_at: z.date() }));
    expect(all.parse(await db.knex(db.table('professionals')).select('removed_at'))).toHaveLength(5);
  });
});
