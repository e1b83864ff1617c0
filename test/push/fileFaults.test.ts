import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import type { Db } from '../../src/db/connect.js';
import { runJob } from '../../src/jobs/runner.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { contactsInboxJob } from '../../src/push/contacts/inbox.js';
import { runCli } from '../helpers/cli.js';
import { dropSchema, freshDb, uniqueSchema } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';
import { pushCliSetup } from './helpers.js';

/** A CSV whose third line opens a quoted field of 17 MiB, more than one record may hold, with rows after it. */
const bigFieldCsv = () =>
  `email,name\na@example.com,Ann\nb@example.com,"${'x'.repeat(17 * 2 ** 20)}"\nc@example.com,Cy\nd@example.com,Di\ne@example.com,Ed\n`;
const BIG_FIELD =
  'line 3: a quoted field runs past 16 MiB, the most one record may hold; the file was not read past line 2, and fails as a whole';

/**
 * A file not read to its end is a failure of the file, never a push that counts as done; a column
 * never sent rejects nothing; an encoding not read is said as such. The real CLI, the sandbox over
 * HTTP, a real database.
 */
describe('contacts push of a file it cannot read whole', () => {
  let sandbox: TestSandbox;
  let dir: string;
  const schema = uniqueSchema('faults');
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    ({ sandbox, dir, env } = await pushCliSetup({
      seed: 7,
      schema,
      env: { API_RETRY_BUDGET_SECONDS: '20' },
    }));
  });
  afterAll(async () => {
    await sandbox?.close();
    await dropSchema(schema);
  });

  const emailsOnPlatform = async () =>
    (await sandbox.control.truth(sandbox.companyId)).contacts.map((c) => c.email).sort();
  const push = async (name: string, content: string | Buffer) => {
    const file = join(dir, name);
    await writeFile(file, content);
    return runCli(['contacts', 'push', file], env);
  };

  it('fails, sending nothing, a CSV with a field over 16 MiB, naming its line and why', async () => {
    const before = await emailsOnPlatform();
    const result = await push('big-field.csv', bigFieldCsv());
    expect(result.stderr).toBe(`review-mirror: ${BIG_FIELD}\n`);
    expect(result.stdout).toBe('');
    expect(result.code).toBe(1);
    expect(await emailsOnPlatform()).toEqual(before);
  });

  it('fails, sending nothing, a CSV with a quote never closed, naming the lines as they are', async () => {
    const result = await push(
      'unclosed.csv',
      'email,name\r\na@example.com,Ann\r\nb@example.com,"Bob\r\nc@example.com,Cy\r\nd@example.com,Di\r\n',
    );
    expect(result.stderr).toBe(
      'review-mirror: line 3: opens a quote that is never closed (lines 3-5, to the end of the file); the file was not read past line 2, and fails as a whole\n',
    );
    expect(result.code).toBe(1);
  });

  it('fails a UTF-16 file saying so, with no NUL in what it prints', async () => {
    const text = 'email,name\r\nu16@example.com,Ann\r\n';
    const result = await push(
      'utf16.csv',
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]),
    );
    expect(result.stderr).toBe(
      'review-mirror: the file is UTF-16 (little-endian), by the byte order mark it starts with, and only utf-8, windows-1252, latin1 are read (--encoding): save it as UTF-8\n',
    );
    expect(result.code).toBe(1);
  });

  it('sends a contact whose unmapped column holds a NUL or bytes not UTF-8', async () => {
    const csv = Buffer.concat([
      Buffer.from('email,name,notes\nnotes1@example.com,One,a \u0000 b\nnotes2@example.com,Two,bad '),
      Buffer.from([0xff]),
      Buffer.from('\n'),
    ]);
    const result = await push('notes.csv', csv);
    expect(result.stderr).toBe('');
    expect(result.stdout).toMatch(/^contacts: read=2 valid=2 rejected=0 .* sent=2 failed=0\n/);
    expect(result.code).toBe(0);
    expect(await emailsOnPlatform()).toEqual(
      expect.arrayContaining(['notes1@example.com', 'notes2@example.com']),
    );
  });

  it('rejects a JSON Lines contact giving its email twice, or a mapped value nested too deep, and sends the rest', async () => {
    const jsonl = [
      '{"email":"right@example.com","email":"wrong@example.com"}',
      `{"email":"deep@example.com","name":${'['.repeat(5_000)}${']'.repeat(5_000)}}`,
      `{"email":"fine@example.com","unmapped":${'['.repeat(5_000)}${']'.repeat(5_000)}}`,
    ].join('\n');
    const result = await push('dup.jsonl', jsonl);
    expect(result.stderr).toBe('');
    expect(result.stdout).toMatch(/^contacts: read=3 valid=1 rejected=2 .* sent=1 failed=0\n/);
    const report = await readFile(join(dir, 'dup.jsonl.rejects.csv'), 'utf8');
    expect(report).toBe(
      'line,field,reason,key\n1,email,is given twice in the object: which of its values to take is ambiguous,\n2,name,is nested more than 100 levels deep,\n',
    );
    const onPlatform = await emailsOnPlatform();
    expect(onPlatform).toContain('fine@example.com');
    expect(onPlatform).not.toContain('wrong@example.com');
    expect(onPlatform).not.toContain('right@example.com');
  });
});

describe('the CRM inbox with a file it cannot read whole', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  let dir: string;
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 8 });
    db = await freshDb();
    api = testApi(sandbox);
    dir = await mkdtemp(join(tmpdir(), 'rm-inbox-faults-'));
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  it('moves to failed/ an export not read to its end, and pushes the next', async () => {
    const inbox = contactsInboxJob(
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
    await writeFile(join(dir, 'a-big-field.csv'), bigFieldCsv());
    await writeFile(join(dir, 'b-fine.csv'), 'email,name\nfine@example.com,Fine\n');
    // Two runs: the first sees the files, the second takes them, unchanged since (settle 0).
    for (let i = 0; i < 2; i++)
      expect((await runJob({ db, log: quietLog }, inbox, { wait: false })).outcome).toBe('success');
    expect(await readdir(join(dir, 'failed'))).toEqual(['a-big-field.csv', 'a-big-field.csv.rejects.csv']);
    expect(await readdir(join(dir, 'processed'))).toEqual(['b-fine.csv', 'b-fine.csv.rejects.csv']);
    const emails = (await sandbox.control.truth(sandbox.companyId)).contacts.map((c) => c.email);
    expect(emails).toContain('fine@example.com');
    expect(emails).not.toContain('a@example.com');
  });

  it('moves to failed/ a UTF-8 export with a byte order mark in an inbox read as windows-1252, and pushes the next', async () => {
    // Read as windows-1252, its first column was named `ï»¿external_id`: the contact went without one.
    const inboxDir = await mkdtemp(join(tmpdir(), 'rm-inbox-bom-'));
    const inbox = contactsInboxJob(
      { db, api, log: quietLog, scrubber: new SecretScrubber() },
      {
        dir: inboxDir,
        schedule: 'off',
        settleMs: 0,
        mapping: loadConfigFile(undefined).contacts,
        rules: [],
        push: { concurrency: 4, ratePerSecond: 1_000, logRetentionDays: 30, encoding: 'windows-1252' },
      },
    );
    await writeFile(
      join(inboxDir, 'a-excel-utf8.csv'),
      Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from('external_id,email,name\r\nCRM-1,bom@example.com,Zoë\r\n'),
      ]),
    );
    await writeFile(
      join(inboxDir, 'b-excel-1252.csv'),
      Buffer.concat([Buffer.from('email,name\r\nzoe1252@example.com,Zo'), Buffer.from([0xeb, 0x0d, 0x0a])]),
    );
    for (let i = 0; i < 2; i++)
      expect((await runJob({ db, log: quietLog }, inbox, { wait: false })).outcome).toBe('success');
    expect(await readdir(join(inboxDir, 'failed'))).toEqual([
      'a-excel-utf8.csv',
      'a-excel-utf8.csv.rejects.csv',
    ]);
    expect(await readFile(join(inboxDir, 'failed', 'a-excel-utf8.csv.rejects.csv'), 'utf8')).toContain(
      'the file is UTF-8, by the byte order mark it starts with, but is read as windows-1252 (--encoding / CRM_INBOX_ENCODING): read it as utf-8, or save it as windows-1252',
    );
    const contacts = (await sandbox.control.truth(sandbox.companyId)).contacts;
    expect(contacts.map((c) => c.email)).not.toContain('bom@example.com');
    expect(contacts.find((c) => c.email === 'zoe1252@example.com')?.name).toBe('Zoë');
  });
});
