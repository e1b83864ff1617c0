import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/db/connect.js';
import { CLI, CliProcess, runCli } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import type { TestSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { pushCliSetup } from './helpers.js';

interface Row {
  external_id: string;
  email: string;
  name: string;
}

const csvOf = (rows: ReadonlyArray<Row | string>) =>
  `external_id,email,name\r\n${rows.map((r) => (typeof r === 'string' ? r : `${r.external_id},${r.email},"${r.name}"`)).join('\r\n')}\r\n`;

/** `contacts push` as an operator runs it: the real CLI, the sandbox over HTTP, a real database. */
describe('contacts push', () => {
  let sandbox: TestSandbox;
  let dir: string;
  const schema = uniqueSchema('push');
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    ({ sandbox, dir, env } = await pushCliSetup({
      seed: 5,
      schema,
      env: { API_RETRY_BUDGET_SECONDS: '20' },
    }));
  });
  afterAll(async () => {
    await sandbox?.close();
    await dropSchema(schema);
  });

  const contactPosts = async () => {
    const counts = (await sandbox.control.requests()).by_route['POST /api/v1/partner/contacts'] ?? {};
    return Object.values(counts).reduce((a, b) => a + b, 0);
  };
  const platformContacts = async () =>
    new Map(
      (await sandbox.control.truth(sandbox.companyId)).contacts.map((c) => [
        c.external_id,
        { email: c.email, name: c.name },
      ]),
    );
  const push = async (name: string, content: string, ...flags: string[]) => {
    const file = join(dir, name);
    await writeFile(file, content);
    return { file, result: await runCli(['contacts', 'push', file, ...flags], env) };
  };

  const people: Row[] = Array.from({ length: 200 }, (_, i) => ({
    external_id: `crm-${i}`,
    email: `person${i}@example.com`,
    name: `Person ${i}, Jr.`,
  }));

  it('sends each valid contact once, the last row of a key winning, and reports the invalid rows by line', async () => {
    const rows: Array<Row | string> = [...people];
    rows.splice(10, 0, 'crm-bad-1,not-an-email,"Bad"'); // line 12
    rows.splice(50, 0, { external_id: 'crm-3', email: 'person3@example.com', name: 'Person 3, renamed' }); // line 52
    rows.splice(80, 0, 'crm-bad-2,'); // line 82: too few columns
    const before = await contactPosts();
    const { file, result } = await push('export.csv', csvOf(rows));
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(
      `contacts: read=203 valid=200 rejected=2 replaced=1 unchanged=0 sent=200 failed=0\nreport: ${file}.rejects.csv\n`,
    );
    expect((await contactPosts()) - before).toBe(200);
    const onPlatform = await platformContacts();
    expect(onPlatform.size).toBe(200);
    expect(onPlatform.get('crm-3')).toEqual({ email: 'person3@example.com', name: 'Person 3, renamed' });
    expect(onPlatform.get('crm-199')).toEqual({ email: 'person199@example.com', name: 'Person 199, Jr.' });
    const report = await readFile(`${file}.rejects.csv`, 'utf8');
    const [header, ...lines] = report.trim().split('\n');
    expect(header).toBe('line,field,reason,key');
    // In the order they were found: a replaced row is known once its successor is read.
    expect(lines.sort((a, b) => Number.parseInt(a, 10) - Number.parseInt(b, 10))).toEqual([
      '5,(row),replaced by line 52 (same key),crm-3',
      '12,email,is not an email address,',
      '82,(row),has 2 columns where the header has 3,',
    ]);
  });

  it('sends nothing when the same file is pushed again, and only the changed rows of a new export', async () => {
    const before = await contactPosts();
    const again = await push(
      'export-again.csv',
      csvOf(people.map((p) => (p.external_id === 'crm-3' ? { ...p, name: 'Person 3, renamed' } : p))),
    );
    expect(again.result.code).toBe(0);
    expect(again.result.stdout).toContain('unchanged=200 sent=0 failed=0');
    expect(await contactPosts()).toBe(before);

    const changed = people.map((p, i) => (i % 50 === 7 ? { ...p, name: `${p.name} (moved)` } : p));
    changed[3] = { ...changed[3]!, name: 'Person 3, renamed' };
    const dry = await push('changed.csv', csvOf(changed), '--dry-run');
    expect(dry.result.stdout).toContain('unchanged=196 to send=4 failed=0');
    expect(await contactPosts()).toBe(before);
    const next = await push('changed.csv', csvOf(changed));
    expect(next.result.stdout).toContain('unchanged=196 sent=4 failed=0');
    expect((await contactPosts()) - before).toBe(4);
    expect((await platformContacts()).get('crm-57')?.name).toBe('Person 57, Jr. (moved)');
  });

  it('leaves the staging rows of a push still sending after a day to it, on a dry run', async () => {
    const open = () => openDb({ url: TEST_DATABASE_URL, schema, poolMax: 1, dataDir: join(dir, 'data') });
    const longPush = '00000000-0000-4000-8000-000000000001';
    const staged = async () => {
      const db = await open();
      try {
        return (await db.knex(db.table('contact_push_staging')).where({ push_id: longPush })).length;
      } finally {
        await db.close();
      }
    };
    const db = await open();
    try {
      // A large export at a low rate, staged a day and a half ago and still sending.
      await db.knex(db.table('contact_push_staging')).insert({
        push_id: longPush,
        key: 'slow-1',
        line: 2,
        email: 'slow@example.com',
        content_hash: 'h',
        staged_at: db.knex.raw(`now() - interval '36 hours'`),
      });
    } finally {
      await db.close();
    }
    expect((await push('dry.csv', csvOf(people.slice(0, 3)), '--dry-run')).result.code).toBe(0);
    expect(await staged()).toBe(1);
    // A real push holds the contacts lease, so no other push is sending: the rows are abandoned.
    expect((await push('dry.csv', csvOf(people.slice(0, 3)))).result.code).toBe(0);
    expect(await staged()).toBe(0);
  });

  it('loses nothing and sends at most the requests in flight again when killed mid-push and run again', async () => {
    const batch = Array.from({ length: 1_000 }, (_, i) => ({
      external_id: `k-${i}`,
      email: `k${i}@example.com`,
      name: `Killed ${i}`,
    }));
    const file = join(dir, 'killed.csv');
    await writeFile(file, csvOf(batch));
    const slow = { ...env, CONTACTS_RATE_PER_SECOND: '200', CONTACTS_CONCURRENCY: '4' };
    const before = await contactPosts();
    const child = new CliProcess(['contacts', 'push', file], slow);
    await waitFor(async () => (await contactPosts()) - before >= 150, 30_000, 10);
    child.kill('SIGKILL');
    await child.exited;
    const sentBeforeKill = (await contactPosts()) - before;
    expect(sentBeforeKill).toBeLessThan(1_000);

    const rerun = await runCli(['contacts', 'push', file], env);
    expect(rerun.code).toBe(0);
    const total = (await contactPosts()) - before;
    // Every contact sent; the re-run repeats at most the requests that were in flight (concurrency).
    expect(total).toBeGreaterThanOrEqual(1_000);
    expect(total).toBeLessThanOrEqual(1_000 + 4);
    const onPlatform = await platformContacts();
    for (const p of batch) expect(onPlatform.get(p.external_id)).toEqual({ email: p.email, name: p.name });
    const again = await runCli(['contacts', 'push', file], env);
    expect(again.stdout).toContain('unchanged=1000 sent=0 failed=0');
  });

  it('ends with every contact on the platform despite 500s, 429s, hangs and cut bodies, records what fails for good, and keeps a row log per push', async () => {
    const fresh = people.map((p) => ({ ...p, external_id: `f-${p.external_id}`, email: `f-${p.email}` }));
    await sandbox.control.setFaults({
      partner: {
        error500: 0.15,
        error429: 0.1,
        hang: 0.05,
        truncated: 0.05,
        retryAfterSeconds: 0,
        routes: ['/api/v1/partner/contacts'],
      },
    });
    try {
      const file = join(dir, 'faulty.csv');
      await writeFile(file, csvOf(fresh));
      // A hung request is abandoned after a second and retried (the upsert makes that harmless);
      // two retries are allowed, so some contacts fail for good and must be recorded as failed.
      const faultyEnv = { ...env, API_REQUEST_TIMEOUT_SECONDS: '1', API_MAX_RETRIES: '2' };
      const first = await runCli(['contacts', 'push', file], faultyEnv);
      expect(first.stdout).toContain('valid=200');
      const failed = Number(first.stdout.match(/failed=(\d+)/)?.[1]);
      expect(first.code).toBe(failed > 0 ? 1 : 0);
      const db = await openDb({ url: TEST_DATABASE_URL, schema, poolMax: 1, dataDir: join(dir, 'data') });
      try {
        const recorded = await db
          .knex(db.table('contacts'))
          .where('key', 'like', 'f-%')
          .andWhere({ outcome: 'failed' });
        expect(recorded).toHaveLength(failed);
        for (const row of recorded) expect(row.last_error).toMatch(/answered (500|429)|timed out|not JSON/);
      } finally {
        await db.close();
      }
      // The next push (the operator's re-run, or the next file in the inbox) sends exactly those.
      for (let attempt = 0, left = failed; left > 0; attempt++) {
        expect(attempt).toBeLessThan(5);
        const again = await runCli(['contacts', 'push', file], faultyEnv);
        expect(again.stdout).toContain(`unchanged=${200 - left}`);
        left = Number(again.stdout.match(/failed=(\d+)/)?.[1]);
      }
    } finally {
      await sandbox.control.setFaults({});
    }
    // The platform refuses a contact for good (422): recorded with its reason, the others sent.
    const refused = await push(
      'refused.csv',
      'external_id,email,name,professional_id\nr-1,r1@example.com,Refused,9b2f5a43-2f5e-4f4e-9f8e-0c6a3f1f0d11\nr-2,r2@example.com,Fine,\n',
    );
    expect(refused.result.stdout).toContain('sent=1 failed=1');
    expect(refused.result.code).toBe(1);
    const refusedDb = await openDb({
      url: TEST_DATABASE_URL,
      schema,
      poolMax: 1,
      dataDir: join(dir, 'data'),
    });
    try {
      const row = await refusedDb.knex(refusedDb.table('contacts')).where({ key: 'r-1' }).first();
      expect(row).toMatchObject({ outcome: 'failed' });
      expect(row.last_error).toContain('professional_id does not refer to a professional');
    } finally {
      await refusedDb.close();
    }
    const onPlatform = await platformContacts();
    for (const p of fresh) expect(onPlatform.get(p.external_id)).toEqual({ email: p.email, name: p.name });

    const db = await openDb({ url: TEST_DATABASE_URL, schema, poolMax: 1, dataDir: join(dir, 'data') });
    try {
      const log = await db.knex(db.table('contact_push_log')).where({ file: join(dir, 'faulty.csv') });
      // Every contact sent and logged, whatever number of pushes it took (a retried request whose
      // first attempt had landed is an update on the platform).
      const sentKeys = new Set(log.filter((l) => l.outcome.startsWith('sent_')).map((l) => l.key));
      expect(sentKeys).toEqual(new Set(fresh.map((p) => p.external_id)));
      const stored = await db.knex(db.table('contacts')).where('key', 'like', 'f-%');
      expect(stored.every((c) => c.outcome === 'sent' && c.platform_contact_id !== null)).toBe(true);
    } finally {
      await db.close();
    }
  });

  it('shows where the contacts stand and the last pushes in status', async () => {
    const json = await runCli(['status', '--json'], env);
    expect(json.code).toBe(0);
    const { contacts } = JSON.parse(json.stdout) as {
      contacts: {
        contacts: Record<string, number>;
        last_pushes: Array<{ file: string; outcomes: Record<string, number> }>;
      };
    };
    expect(contacts.contacts).toEqual({ sent: 200 + 1_000 + 200 + 1, failed: 1 });
    expect(contacts.last_pushes).toHaveLength(5);
    expect(contacts.last_pushes[0]).toMatchObject({
      file: join(dir, 'refused.csv'),
      outcomes: { sent_created: 1, failed: 1 },
    });
    const text = await runCli(['status'], env);
    expect(text.stdout).toContain('on the platform 1401 (failed 1, pending 0; table contacts)');
    expect(text.stdout).toMatch(
      /refused\.csv +sent_created=1 +sent_updated=0 +unchanged=0 +rejected=0 +replaced=0 +failed=1/,
    );
  });

  it('shows a progress bar with rows/s and the time left on a terminal, and none in a pipe', async () => {
    const rows = Array.from({ length: 3_000 }, (_, i) => ({
      external_id: `tty-${i}`,
      email: `tty${i}@example.com`,
      name: `Terminal ${i}`,
    }));
    const file = join(dir, 'terminal.csv');
    await writeFile(file, csvOf(rows));
    // util-linux `script` runs the CLI on a pseudo-terminal, as an operator's shell would.
    const onTty = await new Promise<string>((resolve, reject) => {
      const child = spawn(
        'script',
        ['-qec', `${process.execPath} ${CLI} contacts push ${file}`, '/dev/null'],
        {
          env: { ...env, CONTACTS_RATE_PER_SECOND: '2000' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        out += d;
      });
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}: ${out}`))));
    });
    expect(onTty).toMatch(/sending \[[^\]]+\] \d+% \| \d+ rows \| \d+ rows\/s \| ETA/);
    expect(onTty).toContain('sent=3000 failed=0');
    const piped = await runCli(['contacts', 'push', file, '--full', '--dry-run'], env);
    expect(piped.stderr).toBe('');
  });
});
