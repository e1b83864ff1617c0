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
import { freshDb } from '../helpers/db.js';
import { type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';
import { testApi } from '../pull/helpers.js';

/**
 * The default mapping (no `columns:` in the config file): `name` and `professional_id` may be
 * absent from a CSV header. A column absent is no value known, not a value the CRM emptied: the
 * push sent every contact with `name: ""` and `professional_id: null`, clearing them on the
 * platform for every contact of the export.
 */
describe('a CSV export whose optional column is gone (renamed "Name", or left out)', () => {
  let db: Db;
  let api: PartnerApi;
  let platform: FakePlatform;
  let dir: string;
  const bodies: Array<Record<string, unknown>> = [];
  beforeAll(async () => {
    db = await freshDb();
    platform = await startFakePlatform(({ method, path, body }) => {
      if (method === 'POST' && path === '/contacts') {
        bodies.push(JSON.parse(body) as Record<string, unknown>);
        return { status: 200, body: { contact: { id: `c-${bodies.length}` }, created: true } };
      }
      return { status: 404, body: { error: 'not found' } };
    });
    api = testApi({ url: platform.url, apiKey: 'rm_test_key_123456' });
    dir = await mkdtemp(join(tmpdir(), 'rm-contacts-missing-column-'));
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
        concurrency: 2,
        ratePerSecond: 1_000,
        logRetentionDays: 30,
      },
      {},
      { runId: undefined, fence: NO_FENCE },
    );

  it('never sends a name or professional cleared because its column is not in the header', async () => {
    const file = join(dir, 'crm.csv');
    await writeFile(
      file,
      'external_id,email,name,professional_id\nX1,ana@example.com,Ana Lima,123e4567-e89b-12d3-a456-426614174000\nX2,bo@example.com,Bo Chen,123e4567-e89b-12d3-a456-426614174000\n',
    );
    await push(file);
    expect(bodies).toHaveLength(2);
    // The next export: the CRM's export profile now writes "Name" and no professional column.
    await writeFile(file, 'external_id,email,Name\nX1,ana@example.com,Ana Lima\nX2,bo@example.com,Bo Chen\n');
    await push(file);
    // Sent again (the content differs), without the fields: the platform keeps what it holds.
    expect(bodies.slice(2)).toEqual([
      { external_id: 'X1', email: 'ana@example.com' },
      { external_id: 'X2', email: 'bo@example.com' },
    ]);
    const stored = await db
      .knex(db.table('contacts'))
      .orderBy('key')
      .select('key', 'name', 'professional_id');
    expect(stored.map((c) => [c.key, c.name, c.professional_id !== null])).toEqual([
      ['X1', 'Ana Lima', true],
      ['X2', 'Bo Chen', true],
    ]);

    // A column the export has, its cell empty: the CRM emptied it, and it is sent cleared.
    await writeFile(file, 'external_id,email,name\nX1,ana@example.com,\nX2,bo@example.com,Bo Chen\n');
    await push(file);
    expect(bodies.slice(4)).toEqual([
      { external_id: 'X1', email: 'ana@example.com', name: '' },
      { external_id: 'X2', email: 'bo@example.com', name: 'Bo Chen' },
    ]);
  });
});
