import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/db/connect.js';
import { cliEnv, runCli } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';

/**
 * Spec 4.1 and 4.2 show no answer body worth trusting: ids and statuses holding U+0000 or running
 * to megabytes must still be recorded, after the request was sent, so nothing is sent twice.
 */
describe('contacts and events whose answers carry unstorable text', () => {
  let platform: FakePlatform;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const schema = uniqueSchema('answers');
  const posts = { contacts: 0, events: 0 };

  beforeAll(async () => {
    platform = await startFakePlatform(({ method, path }) => {
      if (method === 'POST' && path === '/contacts') {
        posts.contacts++;
        return { status: 200, body: { contact: { id: `c-${posts.contacts}\u0000` }, created: true } };
      }
      if (method === 'POST' && path === '/events') {
        posts.events++;
        return {
          status: 202,
          body: { id: `e-${posts.events}\u0000`, status: `queued${'!'.repeat(100_000)}` },
        };
      }
      return { status: 404, body: { error: 'not found' } };
    });
    dir = await mkdtemp(join(tmpdir(), 'rm-answers-'));
    env = cliEnv({
      REVIEWS_API_URL: platform.url,
      REVIEWS_API_KEY: 'rm_test_key_123456',
      DATABASE_URL: TEST_DATABASE_URL,
      DB_SCHEMA: schema,
      DATA_DIR: join(dir, 'data'),
    });
  });
  afterAll(async () => {
    await platform?.close();
    await dropSchema(schema);
  });

  const rows = async (table: string, columns: string[]) => {
    const db = await openDb({ url: TEST_DATABASE_URL, dataDir: join(dir, 'data'), schema, poolMax: 1 });
    try {
      return await db.knex(db.table(table)).orderBy(columns[0]!).select(columns);
    } finally {
      await db.close();
    }
  };

  it('records each contact sent with the id the platform gave, and sends none again', async () => {
    const file = join(dir, 'contacts.csv');
    await writeFile(file, 'external_id,email\nx1,a@example.com\nx2,b@example.com\n');
    const first = await runCli(['contacts', 'push', file], env);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('sent=2 failed=0');
    expect(await rows('contacts', ['key', 'platform_contact_id'])).toEqual([
      { key: 'x1', platform_contact_id: 'c-1\uFFFD' },
      { key: 'x2', platform_contact_id: 'c-2\uFFFD' },
    ]);
    expect((await runCli(['contacts', 'push', file], env)).stdout).toContain('sent=0');
    expect(posts.contacts).toBe(2);
  });

  it('records each event sent with the id and a bounded status, and sends none again', async () => {
    for (const email of ['a@example.com', 'b@example.com']) {
      expect((await runCli(['events', 'send', '--email', email, '--type', 'matter.closed'], env)).code).toBe(
        0,
      );
    }
    const flushed = await runCli(['events', 'flush'], env);
    expect(flushed.stdout).toContain('sent=2 retried=0 failed=0');
    const events = await rows('events_outbox', ['email', 'state', 'platform_event_id', 'platform_status']);
    expect(events.map((e) => [e.email, e.state, e.platform_event_id])).toEqual([
      ['a@example.com', 'sent', expect.stringMatching(/^e-[12]\uFFFD$/)],
      ['b@example.com', 'sent', expect.stringMatching(/^e-[12]\uFFFD$/)],
    ]);
    expect(events[0].platform_status).toHaveLength(200);
    expect((await runCli(['events', 'flush'], env)).stdout).toContain('sent=0');
    expect(posts.events).toBe(2);
  });
});
