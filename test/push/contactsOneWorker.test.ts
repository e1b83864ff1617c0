import { mkdtemp, writeFile } from 'node:fs/promises';
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
import { type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';
import { testApi } from '../pull/helpers.js';

/**
 * CONTACTS_CONCURRENCY=1. A contact the platform fails with a 5xx on its third push in a row, alone
 * to send in the first page of 1,000 staged rows (the others unchanged), while the next page holds
 * 500+ new contacts: the only worker asks whether the push sends that contact alone, which the
 * planning tells, and the planning waits for room in the queue, which only that worker makes. The
 * push hung for good, and an abort did not end it.
 */
describe('a contacts push with one worker', () => {
  let db: Db;
  let api: PartnerApi;
  let platform: FakePlatform;
  let dir: string;
  let posts = 0;
  beforeAll(async () => {
    db = await freshDb();
    platform = await startFakePlatform(({ method, path, body }) => {
      if (method === 'POST' && path === '/contacts') {
        posts++;
        const { email } = JSON.parse(body) as { email: string };
        if (email === 'stuck@example.com') return { status: 500, body: { error: 'internal error' } };
        return { status: 200, body: { contact: { id: `c-${posts}` }, created: true } };
      }
      if (method === 'GET' && path === '/reviews') {
        return {
          status: 200,
          body: { reviews: [], pagination: { count: 0, has_more: false, next_cursor: null } },
        };
      }
      return { status: 404, body: { error: 'not found' } };
    });
    api = testApi(
      { url: platform.url, apiKey: 'rm_test_key_123456' },
      {
        retry: { maxRetries: 0, budgetMs: 0, baseDelayMs: 5, maxDelayMs: 50 },
      },
    );
    dir = await mkdtemp(join(tmpdir(), 'rm-contacts-one-worker-'));
  });
  afterAll(async () => {
    await api?.close();
    await platform?.close();
    await db?.close();
  });

  const options: PushContactsOptions = {
    mapping: loadConfigFile(undefined).contacts,
    full: false,
    dryRun: false,
    concurrency: 1,
    ratePerSecond: 100_000,
    logRetentionDays: 30,
  };
  const push = (file: string, signal?: AbortSignal) =>
    pushContacts(
      { db, api, log: quietLog, scrubber: new SecretScrubber() },
      file,
      options,
      {},
      { runId: undefined, fence: NO_FENCE },
      signal,
    ).then(
      (summary) => ({ summary, error: undefined as unknown }),
      (error: unknown) => ({ summary: undefined, error }),
    );

  it("ends a push whose contact at its limit is the first page's only one to send, the next page full of new ones", async () => {
    const old = Array.from({ length: 999 }, (_, i) => `old${i}@example.com,Old ${i}`);
    const first = ['email,name', 'stuck@example.com,Stuck', ...old].join('\n');
    const file = join(dir, 'crm.csv');
    await writeFile(file, `${first}\n`);
    // Pushes 1 and 2: the stuck contact fails (streak 1, then 2); the others are sent once.
    expect((await push(file)).summary).toMatchObject({ sent: 999, failed: 1 });
    expect((await push(file)).summary).toMatchObject({ sent: 0, failed: 1 });
    // Push 3: the same 1,000 rows (page 1: the stuck contact alone to send) and 600 new ones.
    const fresh = Array.from({ length: 600 }, (_, i) => `new${i}@example.com,New ${i}`);
    await writeFile(file, `${first}\n${fresh.join('\n')}\n`);
    const third = await Promise.race([
      push(file),
      new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 30_000)),
    ]);
    expect(third).not.toBe('hung');
    expect(third === 'hung' ? undefined : third.summary).toMatchObject({ sent: 600, failed: 1 });
  }, 60_000);
});
