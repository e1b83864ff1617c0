import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse';
import PQueue from 'p-queue';
import { Pool } from 'undici';
import { loadConfigFile } from '../src/config/configFile.js';
import { type Db, openDb } from '../src/db/connect.js';
import { migrate } from '../src/db/migrate.js';
import { NO_FENCE } from '../src/jobs/lease.js';
import { makeLogger, SecretScrubber } from '../src/log.js';
import { type PushContactsOptions, pushContacts } from '../src/push/contacts/pushContacts.js';
import { startSandbox } from '../src/sandbox/server.js';
import { crmExport } from './crmExport.js';
import { type BenchOptions, type BenchResult, benchApi, medianSeconds } from './harness.js';

const diffPeople = (o: BenchOptions) => (o.quick ? 2_000 : 100_000);
const sendPeople = (o: BenchOptions) => (o.quick ? 500 : 10_000);
const CONCURRENCY = 16;

const log = makeLogger({ level: 'silent', scrubber: new SecretScrubber() });
const scrubber = new SecretScrubber();

async function withSchema<T>(
  bench: BenchOptions,
  prefix: string,
  fn: (db: Db) => Promise<T>,
): Promise<{ result: T; backend: string }> {
  const schema = `${prefix}_${randomBytes(4).toString('hex')}`;
  const db = await openDb({
    url: bench.databaseUrl,
    schema,
    poolMax: 4,
    dataDir: undefined,
  });
  try {
    await migrate(db);
    return { result: await fn(db), backend: db.backend };
  } finally {
    if (db.backend === 'postgres') await db.knex.raw('drop schema if exists ?? cascade', [schema]);
    await db.close();
  }
}

function options(dryRun: boolean): PushContactsOptions {
  return {
    mapping: loadConfigFile(undefined).contacts,
    full: false,
    dryRun,
    concurrency: CONCURRENCY,
    ratePerSecond: 1_000_000,
    logRetentionDays: 90,
  };
}

/**
 * The read and diff of a CRM export, before any request: baseline = streaming the 100,000-row
 * file through csv-parse and discarding the records; subject = `contacts push --dry-run` of it
 * into a fresh schema (decode, parse, validate, hash, stage, diff against `contacts`).
 */
export async function benchContactsDiff(bench: BenchOptions): Promise<BenchResult[]> {
  const people = diffPeople(bench);
  const dir = await mkdtemp(join(tmpdir(), 'bench-contacts-'));
  const file = join(dir, 'export.csv');
  const data = crmExport({ people: people, seed: 7, version: 0 });
  await writeFile(file, data.csv);
  const baseline = await medianSeconds(async () => {
    let n = 0;
    for await (const _ of createReadStream(file).pipe(parse({ bom: true }))) n++;
    if (n !== data.rows + 1) throw new Error(`baseline parsed ${n} records`);
  });
  // A dry run sends nothing: the client only has to exist.
  const api = benchApi({ url: 'http://127.0.0.1:9', apiKey: 'unused-by-a-dry-run' });
  try {
    const { result: subject, backend } = await withSchema(bench, 'bench_diff', (db) =>
      medianSeconds(async () => {
        const summary = await pushContacts(
          { db, api, log, scrubber },
          file,
          options(true),
          {},
          { runId: undefined, fence: NO_FENCE },
        );
        if (summary.toSend !== people) throw new Error(`dry run would send ${summary.toSend}`);
      }),
    );
    return [
      {
        name: 'contacts: read and diff an export',
        baseline: { label: `csv-parse ${data.rows} rows, discard`, seconds: baseline },
        subject: { label: `contacts push --dry-run into ${backend}`, seconds: subject },
        ratio: subject / baseline,
        details: { rows: data.rows, rows_per_second: Math.round(data.rows / subject) },
      },
    ];
  } finally {
    await api.close();
  }
}

/**
 * Sending: baseline = 10,000 bare undici POSTs to the sandbox's contacts endpoint, 16 in flight;
 * subject = `contacts push` of a 10,000-contact export with the same concurrency (every contact
 * recorded pending before and sent after its request, the row log written).
 */
export async function benchContactsSend(bench: BenchOptions): Promise<BenchResult[]> {
  const people = sendPeople(bench);
  const sandbox = await startSandbox({ port: 0, seed: 3, seedReviews: 0 });
  const dir = await mkdtemp(join(tmpdir(), 'bench-contacts-'));
  const api = benchApi(sandbox);
  const pool = new Pool(sandbox.url, { connections: CONCURRENCY });
  try {
    let round = 0;
    const baseline = await medianSeconds(async () => {
      const queue = new PQueue({ concurrency: CONCURRENCY });
      const r = round++;
      await Promise.all(
        Array.from({ length: people }, (_, i) =>
          queue.add(async () => {
            const res = await pool.request({
              method: 'POST',
              path: '/api/v1/partner/contacts',
              headers: { 'x-api-key': sandbox.apiKey, 'content-type': 'application/json' },
              body: JSON.stringify({
                email: `bare${r}-${i}@example.com`,
                name: 'Bare',
                external_id: `bare-${r}-${i}`,
              }),
            });
            await res.body.text();
            if (res.statusCode >= 300) throw new Error(`bare POST answered ${res.statusCode}`);
          }),
        ),
      );
    });
    const times: number[] = [];
    let backend = '';
    for (let run = 0; run < 3; run++) {
      const data = crmExport({
        people: people,
        seed: 100 + run,
        version: 0,
        invalidShare: 0,
        duplicateShare: 0,
      });
      const file = join(dir, `send-${run}.csv`);
      // Other keys each run: every contact is new to the platform, as in the baseline.
      await writeFile(file, data.csv.replaceAll('crm-', `run${run}-`));
      const { result, backend: b } = await withSchema(bench, 'bench_send', async (db) => {
        const start = process.hrtime.bigint();
        const summary = await pushContacts(
          { db, api, log, scrubber },
          file,
          options(false),
          {},
          { runId: undefined, fence: NO_FENCE },
        );
        if (summary.sent !== people) throw new Error(`push sent ${summary.sent}`);
        return Number(process.hrtime.bigint() - start) / 1e9;
      });
      backend = b;
      times.push(result);
    }
    times.sort((a, b) => a - b);
    const subject = times[1]!;
    return [
      {
        name: 'contacts: send an export',
        baseline: { label: `${people} bare POSTs, ${CONCURRENCY} in flight`, seconds: baseline },
        subject: { label: `contacts push of ${people} new contacts into ${backend}`, seconds: subject },
        ratio: subject / baseline,
        details: { contacts_per_second: Math.round(people / subject), concurrency: CONCURRENCY },
      },
    ];
  } finally {
    await pool.close();
    await api.close();
    await sandbox.close();
  }
}
