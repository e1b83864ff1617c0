import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import type { Db } from '../../src/db/connect.js';
import { NO_FENCE } from '../../src/jobs/lease.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { type PushSummary, pushContacts } from '../../src/push/contacts/pushContacts.js';
import { freshDb } from '../helpers/db.js';
import { type FakeAnswer, type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';
import { testApi } from '../pull/helpers.js';

const accepted = (n: number): FakeAnswer => ({
  status: 200,
  body: { contact: { id: `c-${n}` }, created: true },
});

/**
 * A fresh mirror and a platform whose POST /contacts answers `answer` (given the body sent and how
 * many came before it), with what it was sent; `push` pushes a file with the default mapping.
 */
function contactsFixture(answer: (body: Record<string, unknown>, n: number) => FakeAnswer) {
  const fx = {
    db: undefined as unknown as Db,
    api: undefined as unknown as PartnerApi,
    platform: undefined as FakePlatform | undefined,
    dir: '',
    bodies: [] as Array<Record<string, unknown>>,
    file: (name: string) => join(fx.dir, name),
    push: (file: string, over: { concurrency?: number } = {}): Promise<PushSummary | string> =>
      pushContacts(
        { db: fx.db, api: fx.api, log: quietLog, scrubber: new SecretScrubber() },
        file,
        {
          mapping: loadConfigFile(undefined).contacts,
          full: false,
          dryRun: false,
          concurrency: over.concurrency ?? 2,
          ratePerSecond: 100_000,
          logRetentionDays: 30,
        },
        {},
        { runId: undefined, fence: NO_FENCE },
      ).catch((error: unknown) => String(error)),
  };
  beforeAll(async () => {
    fx.db = await freshDb();
    fx.platform = await startFakePlatform(({ method, path, body }) => {
      if (method !== 'POST' || path !== '/contacts') return { status: 404, body: { error: 'not found' } };
      const sent = JSON.parse(body) as Record<string, unknown>;
      fx.bodies.push(sent);
      return answer(sent, fx.bodies.length);
    });
    fx.api = testApi(
      { url: fx.platform.url, apiKey: 'rm_test_key_123456' },
      { retry: { maxRetries: 0, budgetMs: 0, baseDelayMs: 5, maxDelayMs: 50 } },
    );
    fx.dir = await mkdtemp(join(tmpdir(), 'rm-contacts-edges-'));
  });
  afterAll(async () => {
    await fx.api?.close();
    await fx.platform?.close();
    await fx.db?.close();
  });
  return fx;
}

/**
 * The default mapping (no `columns:` in the config file): `name` and `professional_id` may be
 * absent from a CSV header. A column absent is no value known, not a value the CRM emptied: the
 * push sent every contact with `name: ""` and `professional_id: null`, clearing them on the
 * platform for every contact of the export.
 */
describe('a CSV export whose optional column is gone (renamed "Name", or left out)', () => {
  const fx = contactsFixture((_body, n) => accepted(n));

  it('never sends a name or professional cleared because its column is not in the header', async () => {
    const file = fx.file('crm.csv');
    const professional = '123e4567-e89b-12d3-a456-426614174000';
    await writeFile(
      file,
      `external_id,email,name,professional_id\nX1,ana@example.com,Ana Lima,${professional}\nX2,bo@example.com,Bo Chen,${professional}\n`,
    );
    await fx.push(file);
    expect(fx.bodies).toHaveLength(2);
    // The next export: the CRM's export profile now writes "Name" and no professional column.
    await writeFile(file, 'external_id,email,Name\nX1,ana@example.com,Ana Lima\nX2,bo@example.com,Bo Chen\n');
    await fx.push(file);
    // Sent again (the content differs), without the fields: the platform keeps what it holds.
    expect(fx.bodies.slice(2)).toEqual([
      { external_id: 'X1', email: 'ana@example.com' },
      { external_id: 'X2', email: 'bo@example.com' },
    ]);
    const stored = await fx.db
      .knex(fx.db.table('contacts'))
      .orderBy('key')
      .select('key', 'name', 'professional_id');
    expect(stored.map((c) => [c.key, c.name, c.professional_id !== null])).toEqual([
      ['X1', 'Ana Lima', true],
      ['X2', 'Bo Chen', true],
    ]);

    // A column the export has, its cell empty: the CRM emptied it, and it is sent cleared.
    await writeFile(file, 'external_id,email,name\nX1,ana@example.com,\nX2,bo@example.com,Bo Chen\n');
    await fx.push(file);
    expect(fx.bodies.slice(4)).toEqual([
      { external_id: 'X1', email: 'ana@example.com', name: '' },
      { external_id: 'X2', email: 'bo@example.com', name: 'Bo Chen' },
    ]);
  });
});

/**
 * CONTACTS_CONCURRENCY=1. A contact the platform fails with a 5xx on its third push in a row, alone
 * to send in the first page of 1,000 staged rows (the others unchanged), while the next page holds
 * 500+ new contacts: the only worker asks whether the push sends that contact alone, which the
 * planning tells, and the planning waits for room in the queue, which only that worker makes. The
 * push hung for good, and an abort did not end it.
 */
describe('a contacts push with one worker', () => {
  const fx = contactsFixture((body, n) =>
    body.email === 'stuck@example.com' ? { status: 500, body: { error: 'internal error' } } : accepted(n),
  );

  it("ends a push whose contact at its limit is the first page's only one to send, the next page full of new ones", async () => {
    const old = Array.from({ length: 999 }, (_, i) => `old${i}@example.com,Old ${i}`);
    const first = ['email,name', 'stuck@example.com,Stuck', ...old].join('\n');
    const file = fx.file('crm.csv');
    await writeFile(file, `${first}\n`);
    // Pushes 1 and 2: the stuck contact fails (streak 1, then 2); the others are sent once.
    expect(await fx.push(file, { concurrency: 1 })).toMatchObject({ sent: 999, failed: 1 });
    expect(await fx.push(file, { concurrency: 1 })).toMatchObject({ sent: 0, failed: 1 });
    // Push 3: the same 1,000 rows (page 1: the stuck contact alone to send) and 600 new ones.
    const fresh = Array.from({ length: 600 }, (_, i) => `new${i}@example.com,New ${i}`);
    await writeFile(file, `${first}\n${fresh.join('\n')}\n`);
    const third = await Promise.race([
      fx.push(file, { concurrency: 1 }),
      new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 30_000)),
    ]);
    expect(third).toMatchObject({ sent: 600, failed: 1 });
  }, 60_000);
});

/**
 * The platform answered 200 to a contact without external_id, and the write of that outcome failed
 * once as it does while the database restarts (a trigger raising SQLSTATE 57P01, admin_shutdown,
 * on the first `sent` outcome). Not tried again, the contact stayed `pending` and the next push
 * sent it again: a second create, where the platform does not match by email.
 */
describe('a contact accepted by the platform while the database restarts', () => {
  const fx = contactsFixture((_body, n) => accepted(n));
  beforeAll(async () => {
    const { db } = fx;
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
      [db.table('contacts')],
    );
  });

  it('records the answer once the database is back, and never sends the contact again', async () => {
    const file = fx.file('crm.csv');
    await writeFile(file, 'email,name\nana@example.com,Ana\n');
    expect(await fx.push(file, { concurrency: 1 })).toMatchObject({ sent: 1 });
    expect(await fx.push(file, { concurrency: 1 })).toMatchObject({ sent: 0, unchanged: 1 });
    const [row] = await fx.db.knex(fx.db.table('contacts')).select('outcome');
    expect({ posts: fx.bodies.length, row }).toEqual({ posts: 1, row: { outcome: 'sent' } });
  });
});
