import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import type { Db } from '../../src/db/connect.js';
import { runJob } from '../../src/jobs/runner.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { readStagedContacts, stageContactRows } from '../../src/push/contacts/contactsSql.js';
import { contactsInboxJob } from '../../src/push/contacts/inbox.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';

/** How the proxy answers a contact's POST instead of the sandbox. */
interface Fault {
  readonly status: number;
  readonly body: string;
  readonly type?: string;
}

const jsonError = (status: number, error: string): Fault => ({ status, body: JSON.stringify({ error }) });

/**
 * The CRM inbox against the sandbox over HTTP, behind a proxy that answers the contacts POST of
 * chosen emails itself (the sandbox's fault injection draws per request, not per record): a
 * platform refusing or choking on one record, or a proxy's maintenance page in its place.
 */
describe('the CRM inbox when the platform fails contacts one by one', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  let server: Server;
  let root: string;
  const faults = new Map<string, Fault>();
  /** Every contacts POST the proxy saw, by email: its body. */
  const posts = new Map<string, Array<Record<string, unknown>>>();

  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 33 });
    db = await freshDb();
    root = await mkdtemp(join(tmpdir(), 'rm-inbox-contact-faults-'));
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        if (req.method === 'POST' && req.url?.endsWith('/contacts')) {
          const contact = JSON.parse(body.toString()) as Record<string, unknown>;
          const email = String(contact.email);
          posts.set(email, [...(posts.get(email) ?? []), contact]);
          const fault = faults.get(email);
          if (fault !== undefined) {
            res.writeHead(fault.status, { 'content-type': fault.type ?? 'application/json' }).end(fault.body);
            return;
          }
        }
        const headers = Object.fromEntries(
          Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k)),
        ) as Record<string, string>;
        fetch(`${sandbox.url}${req.url}`, {
          method: req.method ?? 'GET',
          headers,
          ...(body.length > 0 ? { body } : {}),
        }).then(
          async (answer) => {
            res.writeHead(answer.status, {
              'content-type': answer.headers.get('content-type') ?? 'text/plain',
            });
            res.end(Buffer.from(await answer.arrayBuffer()));
          },
          () => res.destroy(),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    api = testApi({
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      apiKey: sandbox.apiKey,
    });
  });
  afterAll(async () => {
    await api?.close();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await db?.close();
    await sandbox?.close();
  });

  /** An inbox of its own, in `name` under the test's directory, with the job run as `run` runs it. */
  const inboxOf = async (name: string, concurrency = 4) => {
    const dir = join(root, name);
    await mkdir(dir);
    const job = contactsInboxJob(
      { db, api, log: quietLog, scrubber: new SecretScrubber() },
      {
        dir,
        schedule: 'off',
        settleMs: 0,
        mapping: loadConfigFile(undefined).contacts,
        rules: [],
        push: { concurrency, ratePerSecond: 1_000, logRetentionDays: 30 },
      },
    );
    const run = () =>
      runJob({ db, log: quietLog }, job, { wait: false }).then(
        (r) => r.outcome,
        (error: unknown) => error,
      );
    return {
      run,
      drop: (file: string, text: string) => writeFile(join(dir, file), text),
      /** Two runs: the first sees a dropped file, the second takes and pushes it. */
      take: async () => [await run(), await run()],
      /** The report of `file`, moved to `place`. */
      report: (place: string, file: string) => readFile(join(dir, place, `${file}.rejects.csv`), 'utf8'),
      where: async (file: string) => {
        for (const place of ['', 'processing', 'processed', 'failed']) {
          if ((await readdir(join(dir, place)).catch((): string[] => [])).includes(file)) {
            return place || 'inbox';
          }
        }
        return 'nowhere';
      },
    };
  };
  const platform = async () =>
    new Map(
      (await sandbox.control.truth(sandbox.companyId)).contacts.map((c) => [c.external_id ?? c.email, c]),
    );
  const stored = (key: string) => db.knex(db.table('contacts')).where({ key }).first();
  const postsTo = (email: string) => posts.get(email)?.length ?? 0;
  const csv = (rows: ReadonlyArray<readonly [string, string]>) =>
    `external_id,email,name\n${rows.map(([key, name]) => `${key},${key}@example.com,${name}`).join('\n')}\n`;

  it.each([
    [409, 'email already belongs to another contact'],
    [403, 'contact has opted out of communications'],
    [422, 'name is too long'],
  ])(
    'fails alone a contact an export changed that the platform answers %i, and moves on to the next export',
    async (status, text) => {
      const p = `r${status}`;
      const inbox = await inboxOf(p);
      await inbox.drop(
        'crm-day1.csv',
        csv([
          [`${p}-a`, 'A'],
          [`${p}-b`, 'B'],
          [`${p}-c`, 'C'],
        ]),
      );
      expect(await inbox.take()).toEqual(['success', 'success']);
      expect(await inbox.where('crm-day1.csv')).toBe('processed');

      // Day 2 changes b alone, and the platform refuses it: failed with its text at the first push.
      faults.set(`${p}-b@example.com`, jsonError(status, text));
      await inbox.drop(
        'crm-day2.csv',
        csv([
          [`${p}-a`, 'A'],
          [`${p}-b`, 'B2'],
          [`${p}-c`, 'C'],
        ]),
      );
      expect(await inbox.take()).toEqual(['success', 'success']);
      expect(await inbox.where('crm-day2.csv')).toBe('failed');
      expect(postsTo(`${p}-b@example.com`)).toBe(2);
      expect(await stored(`${p}-b`)).toMatchObject({
        outcome: 'failed',
        last_error: `POST /contacts answered ${status}: ${text}`,
        unavailable_pushes: 0,
      });

      // The next export is pushed, and one that holds b again sends it again (refused, not given up).
      await inbox.drop(
        'crm-day3.csv',
        csv([
          [`${p}-a`, 'A3'],
          [`${p}-b`, 'B2'],
          [`${p}-c`, 'C'],
        ]),
      );
      expect(await inbox.take()).toEqual(['success', 'success']);
      expect(await inbox.where('crm-day3.csv')).toBe('failed');
      expect(postsTo(`${p}-b@example.com`)).toBe(3);
      expect((await platform()).get(`${p}-a`)?.name).toBe('A3');
      faults.delete(`${p}-b@example.com`);
    },
  );

  it.each([
    [500, 'Internal server error'],
    [408, 'Request timeout'],
  ])(
    'gives up a contact an export changed alone, answered %i on three pushes while the platform answers, and moves on',
    async (status, text) => {
      const p = `u${status}`;
      const inbox = await inboxOf(p);
      await inbox.drop(
        'crm-day1.csv',
        csv([
          [`${p}-a`, 'A'],
          [`${p}-b`, 'B'],
        ]),
      );
      await inbox.take();
      expect(await inbox.where('crm-day1.csv')).toBe('processed');

      faults.set(`${p}-b@example.com`, jsonError(status, text));
      await inbox.drop(
        'crm-day2.csv',
        csv([
          [`${p}-a`, 'A'],
          [`${p}-b`, 'B2'],
        ]),
      );
      expect(await inbox.run()).toBe('success');
      // No other contact is sent to vouch that the platform is up: the probe does.
      for (let push = 1; push <= 2; push++) {
        expect(String(await inbox.run())).toMatch(/1 contacts of crm-day2\.csv were not sent/);
        expect(await inbox.where('crm-day2.csv')).toBe('processing');
      }
      expect(await inbox.run()).toBe('success');
      expect(await inbox.where('crm-day2.csv')).toBe('failed');
      const sentB = postsTo(`${p}-b@example.com`);

      await inbox.drop(
        'crm-day3.csv',
        csv([
          [`${p}-a`, 'A3'],
          [`${p}-b`, 'B2'],
        ]),
      );
      expect(await inbox.take()).toEqual(['success', 'success']);
      // Day 3 holds b unchanged: not sent again, and nothing failed this time: the export is
      // done, its report naming b as given up earlier and how to send it again; a is pushed.
      expect(await inbox.where('crm-day3.csv')).toBe('processed');
      expect(postsTo(`${p}-b@example.com`)).toBe(sentB);
      expect((await platform()).get(`${p}-a`)?.name).toBe('A3');
      const report: Array<Record<string, string>> = parse(await inbox.report('processed', 'crm-day3.csv'), {
        columns: true,
      });
      expect(report).toEqual([
        {
          line: '3',
          field: '(row)',
          reason: expect.stringContaining('not sent: given up on an earlier push'),
          key: `${p}-b`,
        },
      ]);
      expect(report[0]!.reason).toMatch(
        /an export changes the contact, or a full push \(contacts push --full\)/,
      );
      expect(await stored(`${p}-b`)).toMatchObject({ outcome: 'failed', unavailable_pushes: 3 });

      // So is every daily export after it that still holds b unchanged.
      await inbox.drop(
        'crm-day4.csv',
        csv([
          [`${p}-a`, 'A4'],
          [`${p}-b`, 'B2'],
        ]),
      );
      expect(await inbox.take()).toEqual(['success', 'success']);
      expect(await inbox.where('crm-day4.csv')).toBe('processed');
      expect(postsTo(`${p}-b@example.com`)).toBe(sentB);
      faults.delete(`${p}-b@example.com`);
    },
  );

  const block = (p: string) => Array.from({ length: 30 }, (_, i) => [`${p}-${i + 1}`, `N${i + 1}`] as const);
  const refusedOfBlock = (p: string) => Array.from({ length: 12 }, (_, i) => `${p}-${i + 6}@example.com`); // 06 to 17

  it('stops the push at a 405 (the contacts route not served there), failing no contact, and sends each once it is', async () => {
    const inbox = await inboxOf('unrouted', 1);
    const rows = [
      ['nr-1', 'A'],
      ['nr-2', 'B'],
      ['nr-3', 'C'],
    ] as const;
    for (const [key] of rows) faults.set(`${key}@example.com`, { status: 405, body: '' });
    await inbox.drop('unrouted.csv', csv(rows));
    await inbox.run();
    expect(String(await inbox.run())).toContain('POST /contacts answered 405');
    expect(await inbox.where('unrouted.csv')).toBe('processing');
    // The first contact stopped it: none is failed, none counted toward giving up.
    expect(rows.map(([key]) => postsTo(`${key}@example.com`))).toEqual([1, 0, 0]);
    for (const [key] of rows) expect((await stored(key))?.outcome ?? null).not.toBe('failed');

    for (const [key] of rows) faults.delete(`${key}@example.com`);
    expect(await inbox.run()).toBe('success');
    expect(await inbox.where('unrouted.csv')).toBe('processed');
    const on = await platform();
    expect(rows.map(([key]) => on.get(key)?.name)).toEqual(['A', 'B', 'C']);
    expect(rows.map(([key]) => postsTo(`${key}@example.com`))).toEqual([2, 1, 1]);
  });

  it('sends every other contact of an export twelve adjacent contacts of which the platform refuses, at once', async () => {
    const inbox = await inboxOf('block409');
    for (const email of refusedOfBlock('b409')) faults.set(email, jsonError(409, 'conflict'));
    await inbox.drop('block.csv', csv(block('b409')));
    expect(await inbox.take()).toEqual(['success', 'success']);
    expect(await inbox.where('block.csv')).toBe('failed');
    const on = await platform();
    expect(block('b409').filter(([key]) => on.has(key))).toHaveLength(18);
    for (const email of refusedOfBlock('b409')) faults.delete(email);
  });

  it('sends every other contact of an export twelve adjacent contacts of which the platform chokes on, in a few pushes', async () => {
    const inbox = await inboxOf('block500', 1);
    const refused = refusedOfBlock('b500');
    for (const email of refused) faults.set(email, jsonError(500, 'Internal server error'));
    await inbox.drop('block.csv', csv(block('b500')));
    expect(await inbox.run()).toBe('success');
    const outcomes: unknown[] = [];
    for (
      let push = 1;
      push <= 8 && ['inbox', 'processing'].includes(await inbox.where('block.csv'));
      push++
    ) {
      outcomes.push(await inbox.run());
    }
    expect(await inbox.where('block.csv'), String(outcomes)).toBe('failed');
    // Ten in a row stop the first pushes (an outage, until the contacts are given up); once given
    // up, they are neither counted in a row nor sent again, and the rest of the file goes through.
    expect(outcomes.length).toBeLessThanOrEqual(5);
    const on = await platform();
    expect(block('b500').filter(([key]) => on.has(key))).toHaveLength(18);
    for (const [key] of block('b500')) {
      const email = `${key}@example.com`;
      // Pushes that sent it (each request retried by the client), not those that held it given up.
      const pushes = await db
        .knex(db.table('contact_push_log'))
        .where({ key })
        .whereIn('operation', ['create', 'retry'])
        .count({ n: '*' });
      if (refused.includes(email)) expect(Number(pushes[0]!.n), email).toBeLessThanOrEqual(3);
      else expect(postsTo(email), email).toBe(1);
    }
    for (const email of refused) {
      expect((await stored(email.replace('@example.com', '')))?.outcome).toBe('failed');
      faults.delete(email);
    }
  });

  it("does not take a proxy's HTML page for the platform's answer to a contact with an external_id: it is sent again", async () => {
    const inbox = await inboxOf('html');
    const page = { status: 200, body: '<html><body>Down for maintenance</body></html>', type: 'text/html' };
    faults.set('html-x@example.com', page);
    faults.set('html-noid@example.com', page);
    await inbox.drop(
      'html.csv',
      'external_id,email,name\nhtml-x,html-x@example.com,X\n,html-noid@example.com,N\n',
    );
    await inbox.run();
    expect(String(await inbox.run())).toMatch(/1 contacts of html\.csv were not sent/);
    expect(await inbox.where('html.csv')).toBe('processing');
    expect((await stored('html-x'))?.outcome).toBe('failed');
    // Without an external_id, sending again could create the contact twice: the 2xx is taken.
    expect((await stored('html-noid@example.com'))?.outcome).toBe('sent');
    expect(postsTo('html-noid@example.com')).toBe(1);

    faults.clear();
    expect(await inbox.run()).toBe('success');
    expect(await inbox.where('html.csv')).toBe('processed');
    expect((await stored('html-x'))?.outcome).toBe('sent');
    expect((await platform()).get('html-x')?.name).toBe('X');
    expect(postsTo('html-noid@example.com')).toBe(1);
  });

  it('clears on the platform a name and a professional the CRM has emptied', async () => {
    const inbox = await inboxOf('cleared');
    const created = await fetch(`${sandbox.url}/api/v1/partner/professionals`, {
      method: 'POST',
      headers: { 'x-api-key': sandbox.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ first_name: 'Omar', last_name: 'Haddad', email: 'omar@team.example' }),
    });
    const professional = ((await created.json()) as { id: string }).id;
    const header = 'external_id,email,name,professional_id\n';
    await inbox.drop(
      'set.csv',
      `${header}clr-1,clr-1@example.com,Ann,${professional}\nclr-2,clr-2@example.com,,\n`,
    );
    await inbox.take();
    expect(await inbox.where('set.csv')).toBe('processed');
    // A first push leaves out the fields it has no value for.
    expect(posts.get('clr-2@example.com')).toEqual([{ email: 'clr-2@example.com', external_id: 'clr-2' }]);
    expect((await platform()).get('clr-1')).toMatchObject({ name: 'Ann', professional_id: professional });

    await inbox.drop('cleared.csv', `${header}clr-1,clr-1@example.com,,\nclr-2,clr-2b@example.com,,\n`);
    await inbox.take();
    expect(await inbox.where('cleared.csv')).toBe('processed');
    // The change is seen (the hash counts the emptied fields) and sent as cleared; clr-2, changed
    // otherwise, never had a name nor a professional: they are left out, not sent cleared.
    expect(posts.get('clr-1@example.com')?.at(-1)).toEqual({
      email: 'clr-1@example.com',
      name: '',
      external_id: 'clr-1',
      professional_id: null,
    });
    expect(posts.get('clr-2b@example.com')).toEqual([{ email: 'clr-2b@example.com', external_id: 'clr-2' }]);
    expect(postsTo('clr-2@example.com')).toBe(1);
    expect((await platform()).get('clr-1')).toMatchObject({ name: '', professional_id: null });
  });

  it('sends a clear again when the push that carried it failed, until the platform takes it', async () => {
    const inbox = await inboxOf('clear-failed');
    const created = await fetch(`${sandbox.url}/api/v1/partner/professionals`, {
      method: 'POST',
      headers: { 'x-api-key': sandbox.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ first_name: 'Lea', last_name: 'Roux', email: 'lea@team.example' }),
    });
    const professional = ((await created.json()) as { id: string }).id;
    const header = 'external_id,email,name,professional_id\n';
    await inbox.drop('set.csv', `${header}clf-1,clf-1@example.com,Ann,${professional}\n`);
    await inbox.take();
    expect((await platform()).get('clf-1')).toMatchObject({ name: 'Ann', professional_id: professional });

    // The export that empties them meets a platform failing that contact: the clear is not taken.
    faults.set('clf-1@example.com', jsonError(503, 'Service unavailable'));
    await inbox.drop('cleared.csv', `${header}clf-1,clf-1@example.com,,\n`);
    await inbox.run();
    expect(String(await inbox.run())).toMatch(/1 contacts of cleared\.csv were not sent/);
    expect(posts.get('clf-1@example.com')?.at(-1)).toMatchObject({ name: '', professional_id: null });
    expect((await platform()).get('clf-1')).toMatchObject({ name: 'Ann', professional_id: professional });

    // Pushed again once the platform takes it: sent cleared again, not with the fields left out.
    faults.delete('clf-1@example.com');
    expect(await inbox.run()).toBe('success');
    expect(await inbox.where('cleared.csv')).toBe('processed');
    expect(posts.get('clf-1@example.com')?.at(-1)).toEqual({
      email: 'clf-1@example.com',
      name: '',
      external_id: 'clf-1',
      professional_id: null,
    });
    expect((await platform()).get('clf-1')).toMatchObject({ name: '', professional_id: null });
    expect(await stored('clf-1')).toMatchObject({ outcome: 'sent', name: null, professional_id: null });

    // Taken: the next change sends the fields that have a value, and no clear any more.
    await inbox.drop('renamed.csv', `${header}clf-1,clf-1b@example.com,,\n`);
    await inbox.take();
    expect(posts.get('clf-1b@example.com')).toEqual([{ email: 'clf-1b@example.com', external_id: 'clf-1' }]);
  });

  it('sends every row of an export of 1,001 rows whose last line ends with a CR alone', async () => {
    const inbox = await inboxOf('lastcr');
    const rows = Array.from({ length: 1_001 }, (_, i) => `cr-${i},cr-${i}@example.com,R${i}`);
    await inbox.drop('lastcr.csv', `external_id,email,name\r\n${rows.join('\r\n')}\r`);
    expect(await inbox.take()).toEqual(['success', 'success']);
    expect(await inbox.where('lastcr.csv')).toBe('processed');
    const on = await platform();
    expect(rows.filter((_, i) => on.get(`cr-${i}`)?.name === `R${i}`)).toHaveLength(1_001);
  });

  it('pages the staged rows past rows of one line number, never skipping one', async () => {
    const pushId = '7c7a3c52-8b0e-4a39-9e58-7d1a33b2d7f1';
    const row = (key: string, line: number) => ({
      key,
      line,
      hash: 'h',
      contact: { email: `${key}@example.com`, name: null, external_id: key, professional_id: null },
    });
    await stageContactRows(db.knex, db, pushId, [row('s-1', 4), row('s-3', 5), row('s-2', 5), row('s-4', 6)]);
    const seen: string[] = [];
    let after: { line: number; key: string } | undefined;
    for (;;) {
      const page = await readStagedContacts(db.knex, db, pushId, after, 1);
      if (page.length === 0) break;
      const last = page.at(-1)!.row;
      seen.push(`${last.line}:${last.key}`);
      after = { line: last.line, key: last.key };
    }
    expect(seen).toEqual(['4:s-1', '5:s-2', '5:s-3', '6:s-4']);
  });
});
