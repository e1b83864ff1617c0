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
 * A platform that answers the contacts POST 429 or 503. With a Retry-After longer than the
 * client's retry budget the client gives up at once, without waiting, so a push that went on would
 * send every contact of the file into the same answer, one after the other (and a 503 would count
 * against each of them).
 */
describe('a contacts push the platform asks to wait, or is unavailable to', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  let dir: string;

  const newClient = () =>
    testApi(sandbox, { retry: { maxRetries: 8, budgetMs: 2_000, baseDelayMs: 5, maxDelayMs: 50 } });
  /** As after a restart, or once the wait the platform asked for is over: a client that keeps none. */
  const restart = async () => {
    await api.close();
    api = newClient();
  };

  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 43 });
    db = await freshDb();
    api = newClient();
    dir = await mkdtemp(join(tmpdir(), 'rm-contacts-503-'));
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
  const exportOf = async (prefix: string, rows: number) => {
    const file = join(dir, `${prefix}.csv`);
    const lines = Array.from({ length: rows }, (_, i) => `${prefix}-${i},${prefix}-${i}@example.com,N${i}`);
    await writeFile(file, `external_id,email,name\n${lines.join('\n')}\n`);
    return file;
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
  /** Contacts of the export by outcome and streak (`failed/1`: failed, one push in a row). */
  const outcomes = async (prefix: string) => {
    const rows: Array<{ outcome: string; unavailable_pushes: number; n: string | number }> = await db
      .knex(db.table('contacts'))
      .where('key', 'like', `${prefix}-%`)
      .select('outcome', 'unavailable_pushes')
      .count({ n: '*' })
      .groupBy('outcome', 'unavailable_pushes');
    return Object.fromEntries(rows.map((r) => [`${r.outcome}/${r.unavailable_pushes}`, Number(r.n)]));
  };
  const unavailable = (retryAfterSeconds?: number) =>
    sandbox.control.setFaults({
      partner: { error503: 1, retryAfterSeconds, routes: ['/api/v1/partner/contacts'], methods: ['POST'] },
    });

  it.each([
    { status: 429, fault: 'error429', says: /rate-limits contacts.*the push stops/ },
    { status: 503, fault: 'error503', says: /unavailable to contacts.*the push stops/ },
  ] as const)(
    'stops sending at the first $status whose Retry-After outlasts the retries, counting no contact against its streak',
    async ({ status, fault, says }) => {
      const prefix = `wait-${status}`;
      const file = await exportOf(prefix, 40);
      await sandbox.control.setFaults({
        partner: {
          [fault]: 1,
          retryAfterSeconds: 600,
          routes: ['/api/v1/partner/contacts'],
          methods: ['POST'],
        },
      });
      const before = await contactPosts();
      const stopped = await push(file);
      // At most the requests already in flight when the first answer came back: not one per contact.
      expect((await contactPosts()) - before).toBeLessThanOrEqual(options.concurrency);
      expect(String(stopped.error)).toMatch(new RegExp(`answered ${status} with a Retry-After of 600 s`));
      expect(stopped.error).toMatchObject({ retryAfterMs: 600_000, status });
      expect(await outcomes(prefix)).toEqual({ 'pending/0': 40 });
      expect(stopped.lines).toContainEqual(
        expect.objectContaining({
          level: 'warn',
          status,
          retry_after_seconds: 600,
          msg: expect.stringMatching(says),
        }),
      );
      // The report is written, and names no contact: none was refused.
      expect(await readFile(`${file}.rejects.csv`, 'utf8')).toBe('line,field,reason,key\n');

      // Until the wait is over, the client sends the platform no contact at all.
      const postsBefore = await contactPosts();
      const held = await push(file);
      // Stopped as the answer itself would stop it, by the client, which sent nothing.
      expect(held.error).toMatchObject({ status, name: 'ContactsRetryAfterError' });
      expect((held.error as Error).cause).toMatchObject({
        message: expect.stringMatching(
          `^POST /contacts not sent: the platform answered ${status} with a Retry-After`,
        ),
      });
      expect(await contactPosts()).toBe(postsBefore);

      // Once the platform takes contacts again, the next push sends them all.
      await sandbox.control.setFaults({});
      await restart();
      const after = await push(file);
      expect(after.error).toBeUndefined();
      expect(after.summary).toMatchObject({ sent: 40, failed: 0 });
      expect(await outcomes(prefix)).toEqual({ 'sent/0': 40 });
    },
  );

  it('fails contacts one by one, each a push in its streak, on a 503 without Retry-After', async () => {
    const file = await exportOf('bare', 40);
    await unavailable(undefined);
    const bare = await push(file);
    expect(String(bare.error)).toMatch(
      /the platform failed 10 contacts in a row \(the last: POST \/contacts answered 503 \(gave up after 8 retries\)\)/,
    );
    const stopped = await outcomes('bare');
    expect(stopped['failed/1']).toBeGreaterThanOrEqual(10);
    expect(stopped['failed/1']).toBeLessThanOrEqual(10 + options.concurrency - 1);
    expect(stopped['pending/0']).toBe(40 - stopped['failed/1']!);
  });

  it("fails contacts one by one on a 503 whose Retry-After the client's retries waited out", async () => {
    const file = await exportOf('brief', 12);
    await unavailable(1);
    const startedAt = Date.now();
    const brief = await push(file);
    // Each contact waited the second asked for once, then its next wait would pass the budget.
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(5_000);
    expect(String(brief.error)).toMatch(
      /the platform failed 10 contacts in a row \(the last: POST \/contacts answered 503 \(gave up after 1 retries\)\)/,
    );
    const stopped = await outcomes('brief');
    expect(stopped['failed/1']).toBeGreaterThanOrEqual(10);
    expect(stopped['pending/0'] ?? 0).toBe(12 - stopped['failed/1']!);
  });
});
