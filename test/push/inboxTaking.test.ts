import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import { parseConfig } from '../../src/config/schema.js';
import type { Db } from '../../src/db/connect.js';
import { runJob } from '../../src/jobs/runner.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { contactsInboxJob } from '../../src/push/contacts/inbox.js';
import { pushJobSpecs } from '../../src/push/jobs.js';
import { freshDb } from '../helpers/db.js';
import { capturedLog, quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { testApi } from '../pull/helpers.js';

const csv = (prefix: string, rows: number, name = 'Person') =>
  `external_id,email,name\n${Array.from({ length: rows }, (_, i) => `${prefix}-${i},${prefix}-${i}@example.com,${name} ${i}`).join('\n')}\n`;

/**
 * How the CRM inbox takes a file: the file read is the file moved, whatever happens to its name
 * meanwhile; a file it cannot take fails alone, with its reason, and the others go on. Real files,
 * a real database, the sandbox over HTTP.
 */
describe('the CRM inbox taking its files', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 33 });
    db = await freshDb();
    api = testApi(sandbox);
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  const inboxJob = (dir: string, over: { ratePerSecond?: number; log?: typeof quietLog } = {}) =>
    contactsInboxJob(
      { db, api, log: over.log ?? quietLog, scrubber: new SecretScrubber() },
      {
        dir,
        schedule: 'off',
        settleMs: 0,
        mapping: loadConfigFile(undefined).contacts,
        rules: [],
        push: { concurrency: 1, ratePerSecond: over.ratePerSecond ?? 1_000, logRetentionDays: 30 },
      },
    );
  const runOnce = (job: ReturnType<typeof inboxJob>) =>
    runJob({ db, log: quietLog }, job, { wait: false }).then(
      (run) => run.outcome,
      (error: unknown) => error,
    );
  const contacts = async () => (await sandbox.control.truth(sandbox.companyId)).contacts;
  const emails = async (prefix: string) =>
    (await contacts())
      .map((c) => c.email)
      .filter((e) => e?.startsWith(`${prefix}-`))
      .sort();
  const expected = (prefix: string, rows: number) =>
    Array.from({ length: rows }, (_, i) => `${prefix}-${i}@example.com`).sort();
  const listing = async (dir: string) => (await readdir(dir).catch((): string[] => [])).sort();
  /** The rows of a `.rejects.csv` report, as an operator's spreadsheet reads them. */
  const reportOf = async (path: string) =>
    parse(await readFile(path, 'utf8'), { columns: true }) as unknown[];
  /** A report's row saying why the file was refused as a whole: no line, no field. */
  const fileRow = (reason: string) => ({ line: '', field: '', reason, key: '' });

  it('pushes the file it read and leaves a replacement written over its name in the inbox for the next poll', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-replace-'));
    const job = inboxJob(dir, { ratePerSecond: 5 });
    await writeFile(join(dir, 'crm.csv'), csv('old', 20));
    expect(await runOnce(job)).toBe('success');
    const pushing = runOnce(job);
    // Mid-push, the CRM drops its next export as docs/push.md says: written, then renamed over.
    await waitFor(async () => (await emails('old')).length >= 2, 20_000, 50);
    await writeFile(join(dir, '.tmp'), csv('new', 5));
    await rename(join(dir, '.tmp'), join(dir, 'crm.csv'));
    expect(await pushing).toBe('success');
    expect(await emails('old')).toEqual(expected('old', 20));
    expect(await readFile(join(dir, 'processed', 'crm.csv'), 'utf8')).toBe(csv('old', 20));
    expect(await readFile(join(dir, 'crm.csv'), 'utf8')).toBe(csv('new', 5));
    for (let i = 0; i < 2; i++) expect(await runOnce(job)).toBe('success');
    expect(await emails('new')).toEqual(expected('new', 5));
    expect(await listing(dir)).toEqual(['failed', 'processed', 'processing']);
  });

  it('pushes first a file a killed run left in processing/, then the newer export of its name', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-resume-'));
    await mkdir(join(dir, 'processing'));
    await writeFile(join(dir, 'processing', 'crm.csv'), csv('left', 3, 'Older'));
    await writeFile(join(dir, 'crm.csv'), csv('left', 3, 'Newer'));
    const job = inboxJob(dir);
    for (let i = 0; i < 2; i++) expect(await runOnce(job)).toBe('success');
    expect(await listing(join(dir, 'processing'))).toEqual([]);
    expect((await listing(join(dir, 'processed'))).filter((n) => !n.endsWith('.rejects.csv'))).toEqual([
      expect.stringMatching(/^crm\.\d{4}-.*Z\.csv$/),
      'crm.csv',
    ]);
    const names = (await contacts()).filter((c) => c.email?.startsWith('left-')).map((c) => c.name);
    expect(names.sort()).toEqual(['Newer 0', 'Newer 1', 'Newer 2']);
  });

  it('passes over a file of processing/ removed by hand during the run, instead of failing the run', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-removed-'));
    await mkdir(join(dir, 'processing'));
    // Twenty contacts at ten a second: the next file of processing/ is removed during their push.
    await writeFile(join(dir, 'processing', 'a-slow.csv'), csv('slow', 20));
    await writeFile(join(dir, 'processing', 'b-removed.csv'), csv('removed', 2));
    const job = inboxJob(dir, { ratePerSecond: 10 });
    const running = runOnce(job);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await rm(join(dir, 'processing', 'b-removed.csv'));
    expect(await running).toBe('success');
    expect(await listing(join(dir, 'processed'))).toEqual(['a-slow.csv', 'a-slow.csv.rejects.csv']);
    expect(await listing(join(dir, 'failed'))).toEqual([]);
    expect(await emails('removed')).toEqual([]);
  });

  it('pushes a file whose name is not valid UTF-8, under its windows-1252 reading', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-latin1-'));
    // `café.csv` in Latin-1, as an SMB or FTP drop leaves it.
    const latin1 = Buffer.concat([Buffer.from(`${dir}/caf`), Buffer.from([0xe9]), Buffer.from('.csv')]);
    await writeFile(latin1, csv('cafe', 2));
    const { log, lines } = capturedLog();
    const job = inboxJob(dir, { log });
    for (let i = 0; i < 2; i++) expect(await runOnce(job)).toBe('success');
    expect(await emails('cafe')).toEqual(expected('cafe', 2));
    expect(await listing(join(dir, 'processed'))).toEqual(['café.csv', 'café.csv.rejects.csv']);
    expect(lines.map((l) => l.msg)).toContain(
      'CRM export name is not valid UTF-8: read as windows-1252 and renamed so',
    );
  });

  it('moves to failed/ a file it cannot read, with its reason, and pushes the files after it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-unreadable-'));
    await chmod(dir, 0o777);
    await writeFile(join(dir, 'a-locked.csv'), csv('locked', 2));
    await chmod(join(dir, 'a-locked.csv'), 0o000);
    await writeFile(join(dir, 'b-open.csv'), csv('open', 2));
    const { log, lines } = capturedLog();
    const job = inboxJob(dir, { log });
    // As root the mode stops nobody: the runs are another user's, as a daemon's in a container is.
    const asRoot = process.geteuid?.() === 0;
    const outcomes: unknown[] = [];
    for (let i = 0; i < 2; i++) {
      if (asRoot) process.seteuid!(65534);
      try {
        outcomes.push(await runOnce(job));
      } finally {
        if (asRoot) process.seteuid!(0);
      }
    }
    expect(outcomes).toEqual(['success', 'success']);
    expect(await listing(join(dir, 'failed'))).toEqual(['a-locked.csv', 'a-locked.csv.rejects.csv']);
    expect(await reportOf(join(dir, 'failed', 'a-locked.csv.rejects.csv'))).toEqual([
      fileRow('the file cannot be read (EACCES)'),
    ]);
    expect(await emails('open')).toEqual(expected('open', 2));
    expect(await emails('locked')).toEqual([]);
    expect(lines).toContainEqual(
      expect.objectContaining({
        file: 'a-locked.csv',
        reason: 'the file cannot be read (EACCES)',
        moved: 'failed',
      }),
    );
  });

  it('moves an empty file to failed/, and takes a header-only export as one with no rows, saying so', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-empty-'));
    await writeFile(join(dir, 'empty.csv'), '');
    await writeFile(join(dir, 'events-empty.csv'), '');
    await writeFile(join(dir, 'header.csv'), 'external_id,email,name\n');
    const { log, lines } = capturedLog();
    const job = inboxJob(dir, { log });
    for (let i = 0; i < 2; i++) expect(await runOnce(job)).toBe('success');
    // Each with its report, as every file taken has one.
    expect(await listing(join(dir, 'failed'))).toEqual([
      'empty.csv',
      'empty.csv.rejects.csv',
      'events-empty.csv',
      'events-empty.csv.rejects.csv',
    ]);
    expect(await listing(join(dir, 'processed'))).toEqual(['header.csv', 'header.csv.rejects.csv']);
    expect(lines).toContainEqual(
      expect.objectContaining({
        file: 'empty.csv',
        reason: 'empty file (0 bytes, not even a header line): did the export fail?',
      }),
    );
    // The reason is in the report too, for an operator who finds the file there.
    for (const name of ['empty.csv', 'events-empty.csv']) {
      expect(await reportOf(join(dir, 'failed', `${name}.rejects.csv`))).toEqual([
        fileRow('empty file (0 bytes, not even a header line): did the export fail?'),
      ]);
    }
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        file: 'header.csv',
        msg: 'CRM export held no records, only its header: nothing to push',
      }),
    );
  });

  it('reads windows-1252 exports, semicolon-separated, when CRM_INBOX_ENCODING and CRM_INBOX_DELIMITER say so', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-1252-'));
    const env = { CRM_INBOX_DIR: dir, CRM_INBOX_CRON: 'off', CRM_INBOX_SETTLE_SECONDS: '0' };
    expect(() => parseConfig({ ...env, CRM_INBOX_ENCODING: 'utf-16' })).toThrow(
      /CRM_INBOX_ENCODING.*must be one of utf-8, windows-1252, latin1/,
    );
    expect(() => parseConfig({ ...env, CRM_INBOX_DELIMITER: ':' })).toThrow(/CRM_INBOX_DELIMITER/);
    const config = parseConfig({ ...env, CRM_INBOX_ENCODING: 'windows-1252', CRM_INBOX_DELIMITER: ';' });
    const [job] = pushJobSpecs({ db, api, log: quietLog, scrubber: new SecretScrubber() }, config);
    // One column only by the delimiter: a name holding a comma.
    await writeFile(
      join(dir, 'crm.csv'),
      Buffer.from('external_id;email;name\nw1252-1;w1252-1@example.com;Ren\xe9e, M\xfcller\n', 'latin1'),
    );
    for (let i = 0; i < 2; i++) expect(await runOnce(job!)).toBe('success');
    expect(await listing(join(dir, 'processed'))).toEqual(['crm.csv', 'crm.csv.rejects.csv']);
    const taken = (await contacts()).find((c) => c.email === 'w1252-1@example.com');
    expect(taken?.name).toBe('Renée, Müller');
  });

  it('refuses a symbolic link once, loudly: moved to failed/ with its reason, its target untouched', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-links-'));
    const elsewhere = await mkdtemp(join(tmpdir(), 'rm-inbox-elsewhere-'));
    await writeFile(join(elsewhere, 'crm.csv'), csv('linked', 2));
    // Relative, as a partner publishing a file from elsewhere on the mount would link it.
    await symlink(relative(dir, join(elsewhere, 'crm.csv')), join(dir, 'a-to-file.csv'));
    await symlink(join(elsewhere, 'gone.csv'), join(dir, 'b-dangling.csv'));
    await symlink(elsewhere, join(dir, 'c-to-dir.csv'));
    await writeFile(join(dir, 'd-plain.csv'), csv('plain', 2));
    const { log, lines } = capturedLog();
    const job = inboxJob(dir, { log });
    for (let i = 0; i < 4; i++) expect(await runOnce(job)).toBe('success');

    expect(await listing(dir)).toEqual(['failed', 'processed', 'processing']);
    expect(await listing(join(dir, 'failed'))).toEqual([
      'a-to-file.csv',
      'a-to-file.csv.rejects.csv',
      'b-dangling.csv',
      'b-dangling.csv.rejects.csv',
      'c-to-dir.csv',
      'c-to-dir.csv.rejects.csv',
    ]);
    // The links moved, not what they point to, which nothing read or sent.
    for (const name of ['a-to-file.csv', 'b-dangling.csv', 'c-to-dir.csv']) {
      expect((await lstat(join(dir, 'failed', name))).isSymbolicLink()).toBe(true);
    }
    expect(await readFile(join(elsewhere, 'crm.csv'), 'utf8')).toBe(csv('linked', 2));
    expect(await emails('linked')).toEqual([]);
    expect(await emails('plain')).toEqual(expected('plain', 2));

    // Each named once with what it points to, in the log and in its report, over four polls.
    const refusals = lines.filter((l) => l.msg === 'CRM export could not be pushed');
    expect(refusals.map((l) => (l as { file?: string }).file).sort()).toEqual([
      'a-to-file.csv',
      'b-dangling.csv',
      'c-to-dir.csv',
    ]);
    const kinds = {
      'a-to-file.csv': 'a regular file',
      'b-dangling.csv': 'which does not exist',
      'c-to-dir.csv': 'a directory',
    };
    for (const [name, kind] of Object.entries(kinds)) {
      const reason = (refusals.find((l) => (l as { file?: string }).file === name) as { reason?: string })
        .reason;
      expect(reason).toMatch(
        new RegExp(`^it is a symbolic link, to ".+" \\(${kind}\\): the inbox takes regular files only`),
      );
      expect(await reportOf(join(dir, 'failed', `${name}.rejects.csv`))).toEqual([fileRow(reason!)]);
    }
  });

  it('finishes at the next run the moves a run stopped between moving a file and its report left undone', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-halfmoved-'));
    for (const sub of ['processing', 'processed', 'failed']) await mkdir(join(dir, sub));
    const report = (line: number) =>
      `line,field,reason,key\n${line},email,is not an email address,k${line}\n`;
    const at = (...path: string[]) => join(dir, ...path);
    // As a stop leaves them: each report written before its file was moved, and still in processing/.
    await writeFile(at('processed', 'daily.csv'), csv('daily', 1));
    await writeFile(at('processed', 'daily.csv.rejects.csv'), report(1));
    await writeFile(at('processing', 'daily.csv.rejects.csv'), report(2));
    await writeFile(at('processed', 'daily.2026-11-26T06-50-00-000Z.csv'), csv('daily', 1));
    await writeFile(at('processing', 'crm.csv.rejects.csv'), report(3));
    await writeFile(at('processed', 'crm.csv'), csv('crm', 1));
    await writeFile(at('processing', 'bad.csv.rejects.csv'), report(4));
    await writeFile(at('failed', 'bad.csv'), csv('bad', 1));
    // Its export removed by hand since: the report is kept where an operator looks.
    await writeFile(at('processing', 'gone.csv.rejects.csv'), report(5));
    const { log, lines } = capturedLog();
    expect(await runOnce(inboxJob(dir, { log }))).toBe('success');

    expect(await listing(at('processing'))).toEqual([]);
    expect(await readFile(at('processed', 'daily.csv.rejects.csv'), 'utf8')).toBe(report(1));
    expect(await readFile(at('processed', 'daily.2026-11-26T06-50-00-000Z.csv.rejects.csv'), 'utf8')).toBe(
      report(2),
    );
    expect(await readFile(at('processed', 'crm.csv.rejects.csv'), 'utf8')).toBe(report(3));
    expect(await readFile(at('failed', 'bad.csv.rejects.csv'), 'utf8')).toBe(report(4));
    expect(await readFile(at('failed', 'gone.csv.rejects.csv'), 'utf8')).toBe(report(5));
    expect(await listing(at('processed'))).toHaveLength(6);
    expect(await listing(at('failed'))).toEqual(['bad.csv', 'bad.csv.rejects.csv', 'gone.csv.rejects.csv']);
    expect(lines).toContainEqual(expect.objectContaining({ level: 'warn', file: 'gone.csv' }));
    // Nothing was pushed again.
    expect(await emails('daily')).toEqual([]);
    expect(await emails('crm')).toEqual([]);
  });
});
