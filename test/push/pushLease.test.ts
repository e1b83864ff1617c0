import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { JobLease } from '../../src/jobs/lease.js';
import { CliProcess, cliEnv } from '../helpers/cli.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

/**
 * `contacts push` from the CLI while `run`'s CRM inbox pushes: both would send the same contacts
 * (twice, for those without an external_id), so the CLI queues behind the inbox's lease. On the
 * real server: the lease is held by this test while the CLI runs.
 */
describe('contacts push while the CRM inbox holds its lease', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let dir: string;
  const schema = uniqueSchema('lease');
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 31 });
    db = await openDb({ url: POSTGRES_URL, schema, poolMax: 2, dataDir: undefined });
    await migrate(db);
    dir = await mkdtemp(join(tmpdir(), 'rm-push-lease-'));
  });
  afterAll(async () => {
    await db?.close();
    await sandbox?.close();
    await dropSchema(schema, POSTGRES_URL);
  });

  it('waits for the inbox to end its run before sending anything', async () => {
    const file = join(dir, 'crm.csv');
    await writeFile(file, 'external_id,email\nl1,l1@example.com\nl2,l2@example.com\n');
    const inbox = await JobLease.tryAcquire(
      db,
      JOB.contactsInbox,
      { holder: 'inbox-replica', seconds: 60 },
      quietLog,
    );
    expect(inbox).toBeDefined();
    const cli = new CliProcess(
      ['contacts', 'push', file],
      cliEnv({
        REVIEWS_API_URL: sandbox.url,
        REVIEWS_API_KEY: sandbox.apiKey,
        DATABASE_URL: POSTGRES_URL,
        DB_SCHEMA: schema,
        LOG_LEVEL: 'info',
      }),
    );
    try {
      await waitFor(() => cli.stderr.includes('job is running in another process; waiting for it'), 30_000);
      expect(cli.stderr).toContain(`"job":"${JOB.contactsInbox}"`);
      expect((await sandbox.control.truth(sandbox.companyId)).contacts).toHaveLength(0);
    } finally {
      await inbox!.release();
    }
    const result = await cli.exited;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('sent=2 failed=0');
    expect((await sandbox.control.truth(sandbox.companyId)).contacts).toHaveLength(2);
  });
});
