import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import type { Db } from '../../src/db/connect.js';
import { NO_FENCE } from '../../src/jobs/lease.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { type PushContactsOptions, pushContacts } from '../../src/push/contacts/pushContacts.js';
import { freshDb } from '../helpers/db.js';
import { capturedLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';

/**
 * A platform that answers the contacts POST 429 with a Retry-After longer than the client's retry
 * budget: the client gives up at once, without waiting, so a push that went on would send every
 * contact of the file into the same limit, one after the other.
 */
describe('a contacts push the platform rate-limits for longer than the retry budget', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  let dir: string;

  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 41 });
    db = await freshDb();
    api = testApi(sandbox, {
      retry: { maxRetries: 8, budgetMs: 2_000, baseDelayMs: 5, maxDelayMs: 50 },
    });
    dir = await mkdtemp(join(tmpdir(), 'rm-contacts-429-'));
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  const contactPosts = async () => {
    const counts = (await sandbox.control.requests()).by_route['POST /api/v1/partner/contacts'] ?? {};
    return Object.values(counts).reduce((a, b) => a + b, 0);
  };
  const options: PushContactsOptions = {
    mapping: loadConfigFile(undefined).contacts,
    full: false,
    dryRun: false,
    concurrency: 2,
    ratePerSecond: 1_000,
    logRetentionDays: 30,
  };
  const push = async (file: string) => {
    const { log, lines } = capturedLog();
    const result = await pushContacts(
      { db, api, log, scrubber: new SecretScrubber() },
      file,
      options,
      {},
      { runId: undefined, fence: NO_FENCE },
    ).then(
      (summary) => ({ summary, error: undefined }),
      (error: unknown) => ({ summary: undefined, error }),
    );
    return { ...result, lines };
  };
  const outcomes = async (prefix: string) => {
    const rows: Array<{ outcome: string; n: string | number }> = await db
      .knex(db.table('contacts'))
      .where('key', 'like', `${prefix}-%`)
      .select('outcome')
      .count({ n: '*' })
      .groupBy('outcome');
    return Object.fromEntries(rows.map((r) => [r.outcome, Number(r.n)]));
  };

  it('stops sending at the first such 429, keeps every contact not sent pending, and says how long to wait', async () => {
    const file = join(dir, 'limited.csv');
    const rows = Array.from({ length: 40 }, (_, i) => `rl-${i},rl-${i}@example.com,R${i}`);
    await writeFile(file, `external_id,email,name\n${rows.join('\n')}\n`);
    await sandbox.control.setFaults({
      partner: {
        error429: 1,
        retryAfterSeconds: 600,
        routes: ['/api/v1/partner/contacts'],
        methods: ['POST'],
      },
    });
    const before = await contactPosts();
    const limited = await push(file);
    // At most the requests already in flight when the first 429 came back: not one per contact.
    expect((await contactPosts()) - before).toBeLessThanOrEqual(options.concurrency);
    expect(String(limited.error)).toMatch(/429.*Retry-After of 600 s/);
    expect(await outcomes('rl')).toEqual({ pending: 40 });
    expect(limited.lines).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        retry_after_seconds: 600,
        msg: expect.stringMatching(/stops/),
      }),
    );
    // The report is written, and names no contact: none was refused.
    expect(await readFile(`${file}.rejects.csv`, 'utf8')).toBe('line,field,reason,key\n');

    // Once the platform takes contacts again, the next push sends them all.
    await sandbox.control.setFaults({});
    const after = await push(file);
    expect(after.error).toBeUndefined();
    expect(after.summary).toMatchObject({ sent: 40, failed: 0 });
    expect(await outcomes('rl')).toEqual({ sent: 40 });
  });
});
