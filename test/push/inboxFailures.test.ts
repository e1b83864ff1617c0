import { mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import type { Db } from '../../src/db/connect.js';
import { runJob } from '../../src/jobs/runner.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { contactsInboxJob } from '../../src/push/contacts/inbox.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';

/**
 * The CRM inbox when a push fails: a file is parked in failed/ only for a fault of its own. The
 * soak found an export parked there because PostgreSQL restarted during its push, so its contacts
 * never reached the platform.
 */
describe('the CRM inbox when a push fails', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  let dir: string;
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 21 });
    db = await freshDb();
    api = testApi(sandbox);
    dir = await mkdtemp(join(tmpdir(), 'rm-inbox-failures-'));
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  const job = () =>
    contactsInboxJob(
      { db, api, log: quietLog, scrubber: new SecretScrubber() },
      {
        dir,
        schedule: 'off',
        settleMs: 0,
        mapping: loadConfigFile(undefined).contacts,
        rules: [],
        push: { concurrency: 4, ratePerSecond: 1_000, logRetentionDays: 30 },
      },
    );
  // The same job across runs, as in `run`: a file is taken once it has not changed since the last.
  let inbox: ReturnType<typeof job> | undefined;
  const runInbox = () => {
    inbox ??= job();
    return runJob({ db, log: quietLog }, inbox, { wait: false }).then(
      (run) => run.outcome,
      (error: unknown) => error,
    );
  };
  const where = async (name: string) => {
    for (const place of ['', 'processed', 'failed']) {
      if ((await readdir(join(dir, place)).catch((): string[] => [])).includes(name)) return place || 'inbox';
    }
    return 'nowhere';
  };
  const onPlatform = async () => (await sandbox.control.truth(sandbox.companyId)).contacts.length;

  it('leaves an export in place when the database fails its push, and pushes it at the next run', async () => {
    await writeFile(join(dir, 'crm.csv'), 'external_id,email,name\nx1,a@example.com,A\nx2,b@example.com,B\n');
    expect(await runInbox()).toBe('success');
    // The push's staging table gone: a failure of the database, not of the file.
    const staging = db.table('contact_push_staging');
    await db.knex.raw('alter table ?? rename to contact_push_staging_away', [staging]);
    const failed = await runInbox().finally(() =>
      db.knex.raw('alter table ?? rename to contact_push_staging', [db.table('contact_push_staging_away')]),
    );
    expect(failed).toBeInstanceOf(Error);
    expect(await where('crm.csv')).toBe('inbox');
    expect(await onPlatform()).toBe(0);
    // Taken again once it has stayed the same for the settle time.
    expect(await runInbox()).toBe('success');
    expect(await runInbox()).toBe('success');
    expect(await where('crm.csv')).toBe('processed');
    expect(await onPlatform()).toBe(2);
  });

  it('parks in failed/ an export that cannot be read as one, and goes on', async () => {
    await writeFile(join(dir, 'twice.csv'), 'email,email\na@example.com,b@example.com\n');
    expect(await runInbox()).toBe('success');
    expect(await runInbox()).toBe('success');
    expect(await where('twice.csv')).toBe('failed');
  });
});
