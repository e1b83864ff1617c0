import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { type RunnableJob, runJob } from '../../src/jobs/runner.js';
import { locationSchema } from '../../src/partner-api/locationsSchema.js';
import { professionalSchema } from '../../src/partner-api/professionalsSchema.js';
import { reconcileReviews } from '../../src/pull/reconcileReviews.js';
import { syncLocations, syncProfessionals } from '../../src/pull/syncDirectory.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { pullContext, testApi, testHttp } from '../pull/helpers.js';

/** A mirror synced from the sandbox, with the data the views and dashboards group by. */
export interface SyncedMirror {
  readonly sandbox: TestSandbox;
  readonly db: Db;
  /** Reviews suppressed on the platform after they were mirrored: the reconcile marked them removed. */
  readonly suppressed: readonly string[];
  close(): Promise<void>;
}

/**
 * Starts a sandbox with two locations, three professionals (one without a location) and reviews
 * spread over several months, some naming a professional; mirrors it all (reviews, reconcile,
 * locations, professionals) into a fresh schema, then suppresses a few reviews and reconciles
 * again so removals exist. `dataDir` puts an embedded database there instead of in memory (for
 * CLI tests, which open it after `close` keeps it); `url` another server than TEST_DATABASE_URL
 * (`undefined`: embedded). On a server the schema is dropped on close unless `keepSchema`.
 */
export async function syncedMirror(
  options: { url?: string | undefined; dataDir?: string; keepSchema?: boolean } = {},
): Promise<SyncedMirror> {
  const sandbox = await testSandbox({ seedReviews: 250, seed: 11 });
  const schema = uniqueSchema();
  const url = 'url' in options ? options.url : TEST_DATABASE_URL;
  const db = await openDb({ url, schema, poolMax: 5, dataDir: options.dataDir });
  const api = testApi(sandbox);
  try {
    await migrate(db);
    const http = testHttp(sandbox);
    const locations: number[] = [];
    for (const body of [
      { name: 'Downtown', city: 'Zürich' },
      { name: 'Harbour', city: 'Cork' },
    ]) {
      locations.push((await http.request('POST', '/locations', { body, schema: locationSchema })).id);
    }
    const professionals: string[] = [];
    const people = [
      { first_name: 'Ana', last_name: 'Núñez', location_id: locations[0] },
      { first_name: 'Ben', last_name: 'Okafor', location_id: locations[1] },
      { first_name: 'Chloé', last_name: 'Martin' },
    ];
    for (const [i, body] of people.entries()) {
      const created = await http.request('POST', '/professionals', {
        body: { ...body, email: `pro${i}@example.com` },
        schema: professionalSchema,
      });
      professionals.push(created.id);
    }
    await http.close();
    // 60 reviews over three months, rating and verification varying, most naming a professional.
    const submitted = Array.from({ length: 60 }, (_, i) => ({
      created_at: new Date(Date.UTC(2025, 1 + (i % 3), 1 + (i % 27), i % 24)).toISOString(),
      rating: [5, 4.5, 4, 3, 1][i % 5]!,
      is_verified: i % 4 !== 0,
      professional_id: i % 7 === 0 ? null : professionals[i % 3]!,
    }));
    await sandbox.control.submitReviews(sandbox.companyId, submitted);

    const ctx = pullContext(db, api);
    const jobs: RunnableJob[] = [
      { name: JOB.reviews, run: (c, s) => syncReviews(ctx, c, s) },
      { name: JOB.locations, run: (c, s) => syncLocations(ctx, c, s) },
      { name: JOB.professionals, run: (c, s) => syncProfessionals(ctx, c, { full: true }, s) },
    ];
    for (const job of jobs) await mustSucceed(db, job);
    const visible = await sandbox.control.visibleReviews(sandbox.companyId);
    // Not the newest: freshness keeps counting removed reviews, and the test compares with the platform.
    const suppressed = [visible[3]!.id, visible[40]!.id, visible[200]!.id];
    for (const id of suppressed) await sandbox.control.suppress(id);
    await mustSucceed(db, { name: JOB.reconcile, run: (c, s) => reconcileReviews(ctx, c, s) });
    await api.close();
    const close = db.close;
    return {
      sandbox,
      db,
      suppressed,
      close: async () => {
        if (db.backend === 'postgres' && !options.keepSchema) {
          await db.knex.raw('drop schema if exists ?? cascade', [schema]).catch(() => {});
        }
        await close();
        await sandbox.close();
      },
    };
  } catch (error) {
    await api.close();
    await db.close();
    await sandbox.close();
    throw error;
  }
}

async function mustSucceed(db: Db, job: RunnableJob): Promise<void> {
  const run = await runJob({ db, log: quietLog }, job, { wait: true });
  if (run.outcome !== 'success') throw new Error(`${job.name} did not succeed: ${JSON.stringify(run)}`);
}
