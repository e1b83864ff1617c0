import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/db/connect.js';
import { cliEnv, runCli } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { seededDataDir } from '../helpers/embeddedTemplate.js';
import {
  type FakeAnswer,
  type FakePlatform,
  type FakeRequest,
  startFakePlatform,
} from '../helpers/fakePlatform.js';

/** The real CLI against a fake platform answering `answer`, on a schema (or data directory) of its own. */
function cliFixture(answer: (req: FakeRequest) => FakeAnswer): {
  dir: string;
  env: NodeJS.ProcessEnv;
  schema: string;
} {
  const fixture = { dir: '', env: {} as NodeJS.ProcessEnv, schema: uniqueSchema('answers') };
  let platform: FakePlatform | undefined;
  beforeAll(async () => {
    platform = await startFakePlatform(answer);
    fixture.dir = await mkdtemp(join(tmpdir(), 'rm-answers-'));
    if (!TEST_DATABASE_URL) await seededDataDir(join(fixture.dir, 'data'));
    fixture.env = cliEnv({
      REVIEWS_API_URL: platform.url,
      REVIEWS_API_KEY: 'rm_test_key_123456',
      DATABASE_URL: TEST_DATABASE_URL,
      DB_SCHEMA: fixture.schema,
      DATA_DIR: join(fixture.dir, 'data'),
    });
  });
  afterAll(async () => {
    await platform?.close();
    await dropSchema(fixture.schema);
  });
  return fixture;
}

/** `columns` of every row of `table` in the fixture's database, ordered by the first. */
async function readRows(cli: { dir: string; schema: string }, table: string, columns: string[]) {
  const db = await openDb({
    url: TEST_DATABASE_URL,
    dataDir: join(cli.dir, 'data'),
    schema: cli.schema,
    poolMax: 1,
  });
  try {
    return await db.knex(db.table(table)).orderBy(columns[0]!).select(columns);
  } finally {
    await db.close();
  }
}

/**
 * Spec 4.1 and 4.2 show no answer body worth trusting: ids and statuses holding U+0000 or running
 * to megabytes must still be recorded, after the request was sent, so nothing is sent twice.
 */
describe('contacts and events whose answers carry unstorable text', () => {
  const posts = { contacts: 0, events: 0 };
  const cli = cliFixture(({ method, path }) => {
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

  const rows = (table: string, columns: string[]) => readRows(cli, table, columns);

  it('records each contact sent with the id the platform gave, and sends none again', async () => {
    const file = join(cli.dir, 'contacts.csv');
    await writeFile(file, 'external_id,email\nx1,a@example.com\nx2,b@example.com\n');
    const first = await runCli(['contacts', 'push', file], cli.env);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('sent=2 failed=0');
    expect(await rows('contacts', ['key', 'platform_contact_id'])).toEqual([
      { key: 'x1', platform_contact_id: 'c-1\uFFFD' },
      { key: 'x2', platform_contact_id: 'c-2\uFFFD' },
    ]);
    expect((await runCli(['contacts', 'push', file], cli.env)).stdout).toContain('sent=0');
    expect(posts.contacts).toBe(2);
  });

  it('records each event sent with the id and a bounded status, and sends none again', async () => {
    for (const email of ['a@example.com', 'b@example.com']) {
      expect(
        (await runCli(['events', 'send', '--email', email, '--type', 'matter.closed'], cli.env)).code,
      ).toBe(0);
    }
    const flushed = await runCli(['events', 'flush'], cli.env);
    expect(flushed.stdout).toContain('sent=2 retried=0 failed=0');
    const events = await rows('events_outbox', ['email', 'state', 'platform_event_id', 'platform_status']);
    expect(events.map((e) => [e.email, e.state, e.platform_event_id])).toEqual([
      ['a@example.com', 'sent', expect.stringMatching(/^e-[12]\uFFFD$/)],
      ['b@example.com', 'sent', expect.stringMatching(/^e-[12]\uFFFD$/)],
    ]);
    expect(events[0].platform_status).toHaveLength(200);
    expect((await runCli(['events', 'flush'], cli.env)).stdout).toContain('sent=0');
    expect(posts.events).toBe(2);
  });
});

/**
 * A 2xx whose body is no JSON (`OK`, `Created`): the status says the platform accepted the request,
 * so it is recorded as sent, never sent again to the person it reaches.
 */
describe('contacts and events accepted with a body that is not JSON', () => {
  const posts = { contacts: 0, events: 0 };
  const cli = cliFixture(({ method, path }) => {
    if (method === 'POST' && path === '/contacts') {
      posts.contacts++;
      return { status: 201, body: 'Created' };
    }
    if (method === 'POST' && path === '/events') {
      posts.events++;
      // The second answer cut short: a POST that cannot be sent again harmlessly is not.
      return { status: 200, body: posts.events === 2 ? '{"id":"e-2","sta' : 'OK' };
    }
    return { status: 404, body: { error: 'not found' } };
  });

  it('sends each contact once, with an external_id or without one', async () => {
    const file = join(cli.dir, 'contacts.csv');
    await writeFile(file, 'external_id,email\nx1,a@example.com\n,b@example.com\n');
    const first = await runCli(['contacts', 'push', file], cli.env);
    expect(first.stdout).toContain('sent=2 failed=0');
    expect(first.code).toBe(0);
    expect((await runCli(['contacts', 'push', file], cli.env)).stdout).toContain('sent=0 failed=0');
    expect(posts.contacts).toBe(2);
  });

  it('sends each event once, its answer whole or cut short', async () => {
    for (const email of ['a@example.com', 'b@example.com']) {
      expect(
        (await runCli(['events', 'send', '--email', email, '--type', 'matter.closed'], cli.env)).code,
      ).toBe(0);
      expect((await runCli(['events', 'flush'], cli.env)).stdout).toContain('sent=1 retried=0 failed=0');
    }
    expect((await runCli(['events', 'flush'], cli.env)).stdout).toContain('sent=0');
    expect(posts.events).toBe(2);
  });
});

/**
 * A 2xx whose body says the platform refused the request (`{"success": false, "error": …}`): the
 * contact or event failed with the platform's text, never recorded as sent and silently lost.
 */
describe('contacts and events refused in a success body', () => {
  const refusal = { success: false, error: 'Unknown event_type: matter.closed' };
  const cli = cliFixture(({ method, path }) =>
    method === 'POST' && (path === '/contacts' || path === '/events')
      ? { status: 200, body: refusal }
      : { status: 404, body: { error: 'not found' } },
  );

  it('fails the contact with the platform text', async () => {
    const file = join(cli.dir, 'contacts.csv');
    await writeFile(file, 'external_id,email\nx1,a@example.com\n');
    const pushed = await runCli(['contacts', 'push', file], cli.env);
    expect(pushed.stdout).toContain('sent=0 failed=1');
    expect(pushed.code).toBe(1);
    expect(await readRows(cli, 'contacts', ['key', 'last_error'])).toEqual([
      { key: 'x1', last_error: 'POST /contacts answered 200: Unknown event_type: matter.closed' },
    ]);
  });

  it('fails the event with the platform text, and does not send it again', async () => {
    const send = ['events', 'send', '--email', 'a@example.com', '--type', 'matter.closed'];
    expect((await runCli(send, cli.env)).code).toBe(0);
    expect((await runCli(['events', 'flush'], cli.env)).stdout).toContain('sent=0 retried=0 failed=1');
    expect(await readRows(cli, 'events_outbox', ['email', 'state', 'last_error'])).toEqual([
      {
        email: 'a@example.com',
        state: 'failed',
        last_error: 'POST /events answered 200: Unknown event_type: matter.closed',
      },
    ]);
  });
});

/**
 * A 403 on one record while the key works for every other (the spec has 401 for a bad key, and
 * shows no error codes for contacts or events): that record fails, with the platform's text, and
 * the rest is sent. A contact is sent again by a later export that holds it; an event stays failed,
 * not flagged, until an operator's `events retry` (sent again on its own it would be refused every
 * few minutes for ever). A key refused everywhere still stops everything.
 */
describe('a contact and an event answered 403 while the key works', () => {
  const sent = { contacts: 0, events: 0, keyChecks: 0 };
  const optedOut = { status: 403, body: { error: 'contact has opted out of communications' } };
  const cli = cliFixture(({ method, path, body }) => {
    if (method === 'GET' && path === '/reviews') {
      sent.keyChecks++;
      return {
        status: 200,
        body: { reviews: [], pagination: { count: 0, has_more: false, next_cursor: null } },
      };
    }
    const optOut = method === 'POST' && body.includes('optout@example.com');
    if (method === 'POST' && path === '/contacts') {
      if (optOut) return optedOut;
      sent.contacts++;
      return { status: 201, body: { contact: { id: `c-${sent.contacts}` }, created: true } };
    }
    if (method === 'POST' && path === '/events') {
      if (optOut) return optedOut;
      sent.events++;
      return { status: 202, body: { id: `e-${sent.events}`, status: 'queued' } };
    }
    return { status: 404, body: { error: 'not found' } };
  });

  it('fails that contact alone and sends the others', async () => {
    const file = join(cli.dir, 'contacts.csv');
    const others = Array.from({ length: 5 }, (_, i) => `x${i + 1},c${i + 1}@example.com`);
    await writeFile(file, `external_id,email\nx0,optout@example.com\n${others.join('\n')}\n`);
    const pushed = await runCli(['contacts', 'push', file], cli.env);
    expect(pushed.stdout).toContain('sent=5 failed=1');
    expect(pushed.code).toBe(1);
    expect(sent.contacts).toBe(5);
    const failed = (await readRows(cli, 'contacts', ['key', 'last_error'])).filter(
      (r) => r.last_error !== null,
    );
    expect(failed).toEqual([
      { key: 'x0', last_error: 'POST /contacts answered 403: contact has opted out of communications' },
    ]);
    expect(sent.keyChecks).toBe(1);
  });

  it('sends the other event, and fails that one, not flagged, without trying it again', async () => {
    for (const email of ['optout@example.com', 'a@example.com']) {
      const send = ['events', 'send', '--email', email, '--type', 'matter.closed'];
      expect((await runCli(send, cli.env)).code).toBe(0);
    }
    expect((await runCli(['events', 'flush'], cli.env)).stdout).toContain('sent=1 retried=0 failed=1');
    expect(sent.events).toBe(1);
    expect(
      await readRows(cli, 'events_outbox', ['email', 'state', 'possible_duplicate', 'last_error']),
    ).toEqual([
      { email: 'a@example.com', state: 'sent', possible_duplicate: false, last_error: null },
      {
        email: 'optout@example.com',
        state: 'failed',
        possible_duplicate: false,
        last_error: 'POST /events answered 403: contact has opted out of communications',
      },
    ]);
  });
});

/**
 * A 2xx whose body is cut off in transit (the connection drops once the status and a few bytes
 * arrived): the platform acted on the request, so what cannot be sent again harmlessly is
 * recorded as sent, not sent again as an unknown outcome.
 */
describe('contacts and events accepted, their answer cut off in transit', () => {
  const posts = { contacts: 0, events: 0 };
  const cli = cliFixture(({ method, path }) => {
    if (method === 'POST' && path === '/contacts') {
      posts.contacts++;
      return { status: 201, body: { contact: { id: `c-${posts.contacts}` }, created: true }, cutAfter: 5 };
    }
    if (method === 'POST' && path === '/events') {
      posts.events++;
      return { status: 202, body: { id: `e-${posts.events}`, status: 'queued' }, cutAfter: 5 };
    }
    return { status: 404, body: { error: 'not found' } };
  });

  it('sends a contact without external_id once', async () => {
    const file = join(cli.dir, 'contacts.csv');
    await writeFile(file, 'external_id,email\n,b@example.com\n');
    const first = await runCli(['contacts', 'push', file], cli.env);
    expect(first.stdout).toContain('sent=1 failed=0');
    expect(first.code).toBe(0);
    expect((await runCli(['contacts', 'push', file], cli.env)).stdout).toContain('sent=0 failed=0');
    expect(posts.contacts).toBe(1);
  });

  it('sends an event once', async () => {
    const send = ['events', 'send', '--email', 'a@example.com', '--type', 'matter.closed'];
    expect((await runCli(send, cli.env)).code).toBe(0);
    expect((await runCli(['events', 'flush'], cli.env)).stdout).toContain('sent=1 retried=0 failed=0');
    expect((await runCli(['events', 'flush'], cli.env)).stdout).toContain('sent=0');
    expect(posts.events).toBe(1);
  });
});

/**
 * A record the platform chokes on (500 on every push while it takes the others) is given up at
 * its third push in a row: `contacts push` says so in its summary line, apart from other failures.
 */
describe('a contact the platform fails on every push while it takes the others', () => {
  const posts = { contacts: 0, poison: 0 };
  const cli = cliFixture(({ method, path, body }) => {
    if (method === 'POST' && path === '/contacts') {
      posts.contacts++;
      if (body.includes('poison@example.com')) {
        posts.poison++;
        return { status: 500, body: { error: 'internal error' } };
      }
      return { status: 201, body: { contact: { id: `c-${posts.contacts}` }, created: true } };
    }
    // The probe before a contact is given up: the platform still answers.
    if (method === 'GET' && path === '/reviews') {
      return {
        status: 200,
        body: { reviews: [], pagination: { count: 0, has_more: false, next_cursor: null } },
      };
    }
    return { status: 404, body: { error: 'not found' } };
  });

  it('counts it given up in the summary line at its third push, then still given up, not failed', async () => {
    const file = join(cli.dir, 'choke.csv');
    await writeFile(
      file,
      'external_id,email\nc1,c1@example.com\npoison,poison@example.com\nc2,c2@example.com\n',
    );
    const env = { ...cli.env, API_MAX_RETRIES: '0' };
    const lines: string[] = [];
    for (let push = 1; push <= 4; push++) {
      const result = await runCli(['contacts', 'push', file], env);
      // Nothing fails in the fourth push: the contact given up is not sent, and named apart.
      expect(result.code, result.stderr).toBe(push < 4 ? 1 : 0);
      lines.push(
        result.stdout.split('\n')[0]!.replace(/^contacts: read=3 valid=3 rejected=0 replaced=0 /, ''),
      );
    }
    expect(lines).toEqual([
      'unchanged=0 sent=2 failed=1',
      'unchanged=2 sent=0 failed=1',
      'unchanged=2 sent=0 failed=1 given_up=1',
      // A later push of the same content does not send it again: given up until it changes (or
      // a full push), it is counted still given up, not failed, without a request.
      'unchanged=2 sent=0 failed=0 still_given_up=1',
    ]);
    expect(posts).toEqual({ contacts: 5, poison: 3 });
  });
});
