import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import type { Db } from '../../src/db/connect.js';
import { NO_FENCE } from '../../src/jobs/lease.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { pushContacts } from '../../src/push/contacts/pushContacts.js';
import { freshDb, TEST_DATABASE_URL } from '../helpers/db.js';
import { type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';
import { testApi } from '../pull/helpers.js';

/**
 * The platform answered 200 to a contact without external_id, and the write of that outcome failed
 * once as it does while the database restarts (a trigger raising SQLSTATE 57P01, admin_shutdown,
 * on the first `sent` outcome). Not tried again, the contact stayed `pending` and the next push
 * sent it again: a second create, where the platform does not match by email.
 */
describe.runIf(TEST_DATABASE_URL)('a contact accepted by the platform while the database restarts', () => {
  let db: Db;
  let api: PartnerApi;
  let platform: FakePlatform;
  let dir: string;
  let posts = 0;
  beforeAll(async () => {
    db = await freshDb();
    platform = await startFakePlatform(({ method, path }) => {
      if (method === 'POST' && path === '/contacts') {
        posts++;
        return { status: 200, body: { contact: { id: `c-${posts}` }, created: true } };
      }
      return { status: 404, body: { error: 'not found' } };
    });
    api = testApi({ url: platform.url, apiKey: 'rm_test_key_123456' });
    dir = await mkdtemp(join(tmpdir(), 'rm-contacts-outcome-retry-'));
    const t = db.table('contacts');
    await db.knex.raw(`create sequence ${db.schema}.blip_once`);
    await db.knex.raw(
      `create function ${db.schema}.blip() returns trigger language plpgsql as $$
       begin
         if new.outcome = 'sent' and nextval('${db.schema}.blip_once') = 1 then
           raise exception 'terminating connection due to administrator command' using errcode = '57P01';
         end if;
         return new;
       end $$`,
    );
    await db.knex.raw(
      `create trigger blip before update on ?? for each row execute function ${db.schema}.blip()`,
      [t],
    );
  });
  afterAll(async () => {
    await api?.close();
    await platform?.close();
    await db?.close();
  });

  const push = (file: string) =>
    pushContacts(
      { db, api, log: quietLog, scrubber: new SecretScrubber() },
      file,
      {
        mapping: loadConfigFile(undefined).contacts,
        full: false,
        dryRun: false,
        concurrency: 1,
        ratePerSecond: 1_000,
        logRetentionDays: 30,
      },
      {},
      { runId: undefined, fence: NO_FENCE },
    ).then(
      () => 'ok',
      (error: unknown) => String(error),
    );

  it('records the answer once the database is back, and never sends the contact again', async () => {
    const file = join(dir, 'crm.csv');
    await writeFile(file, 'email,name\nana@example.com,Ana\n');
    const first = await push(file);
    const second = await push(file);
    const [row] = await db.knex(db.table('contacts')).select('outcome');
    expect({ first, second, posts, row }).toEqual({
      first: 'ok',
      second: 'ok',
      posts: 1,
      row: { outcome: 'sent' },
    });
  });
});
