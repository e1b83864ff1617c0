import { execFileSync } from 'node:child_process';
import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import type { Db } from '../../src/db/connect.js';
import { type JobRun, runJob } from '../../src/jobs/runner.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { contactsInboxJob } from '../../src/push/contacts/inbox.js';
import { freshDb } from '../helpers/db.js';
import { capturedLog, quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';

const csv = (prefix: string, rows: number) =>
  `external_id,email,name\n${Array.from({ length: rows }, (_, i) => `${prefix}-${i},${prefix}-${i}@example.com,Person ${i}`).join('\n')}\n`;

/** Node has no mkfifo: the system's, as an operator's shell would make one. */
const mkfifo = (path: string) => execFileSync('mkfifo', [path]);

/** A logged line of the inbox, with the fields its refusals carry. */
type Line = { level: string; msg: string; file?: string; path?: string; reason?: string };

/**
 * Entries of the inbox that are not files under an export's name: a directory (`contacts.csv/`,
 * as tools writing an export in parts leave one) or a named pipe. Each is named once, with why,
 * and left where it is; a pipe is never opened, and the files beside them are pushed. Real
 * directories, pipes and files, a real database, the sandbox over HTTP.
 */
describe('the CRM inbox meeting entries that are not files', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 41 });
    db = await freshDb();
    api = testApi(sandbox);
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  const inboxJob = (dir: string, log: typeof quietLog) =>
    contactsInboxJob(
      { db, api, log, scrubber: new SecretScrubber() },
      {
        dir,
        schedule: 'off',
        settleMs: 0,
        mapping: loadConfigFile(undefined).contacts,
        rules: [],
        push: { concurrency: 1, ratePerSecond: 1_000, logRetentionDays: 30 },
      },
    );
  /**
   * One run, failed fast if it hangs: a pipe opened for reading would wait for a writer for ever,
   * and the test would otherwise only time out, saying nothing of why.
   */
  const runOnce = async (job: ReturnType<typeof inboxJob>): Promise<JobRun> => {
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('the run hung: was a pipe opened?')), 15_000);
    });
    try {
      const run = await Promise.race([runJob({ db, log: quietLog }, job, { wait: false }), hung]);
      expect(run.outcome).toBe('success');
      return run;
    } finally {
      clearTimeout(timer);
    }
  };
  const emails = async (prefix: string) =>
    (await sandbox.control.truth(sandbox.companyId)).contacts
      .map((c) => c.email)
      .filter((e) => e?.startsWith(`${prefix}-`))
      .sort();
  const expected = (prefix: string, rows: number) =>
    Array.from({ length: rows }, (_, i) => `${prefix}-${i}@example.com`).sort();
  const listing = async (dir: string) => (await readdir(dir).catch((): string[] => [])).sort();
  const refusals = (lines: readonly unknown[]) =>
    (lines as Line[]).filter((l) => l.msg === 'CRM export could not be pushed');
  const DIRECTORY =
    /^it is a directory, not a file: the inbox takes regular files only, and leaves it where it is;/;
  const PIPE =
    /^it is a named pipe, not a file, never opened \(a read would wait for a writer\): the inbox takes regular files only, and leaves it where it is;/;

  it('names a directory and a pipe under an export name once each, leaves them unopened where they are, and pushes the files beside them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-entries-'));
    await mkdir(join(dir, 'contacts-2026.csv'));
    await writeFile(join(dir, 'contacts-2026.csv', 'part-0000.csv'), csv('part', 2));
    mkfifo(join(dir, 'contacts.csv'));
    await writeFile(join(dir, 'd-plain.csv'), csv('plain', 2));
    // A report, in capitals: never an export, as ever.
    await writeFile(join(dir, 'OLD.CSV.REJECTS.CSV'), csv('report', 1));
    const { log, lines } = capturedLog();
    const job = inboxJob(dir, log);
    const runs = [];
    for (let i = 0; i < 4; i++) runs.push(await runOnce(job));

    expect(await listing(dir)).toEqual([
      'OLD.CSV.REJECTS.CSV',
      'contacts-2026.csv',
      'contacts.csv',
      'failed',
      'processed',
      'processing',
    ]);
    expect((await lstat(join(dir, 'contacts.csv'))).isFIFO()).toBe(true);
    expect(await readFile(join(dir, 'contacts-2026.csv', 'part-0000.csv'), 'utf8')).toBe(csv('part', 2));
    expect(await listing(join(dir, 'failed'))).toEqual([]);
    expect(await listing(join(dir, 'processing'))).toEqual([]);
    expect(await listing(join(dir, 'processed'))).toEqual(['d-plain.csv', 'd-plain.csv.rejects.csv']);
    expect(await emails('plain')).toEqual(expected('plain', 2));
    expect(await emails('part')).toEqual([]);
    expect(await emails('report')).toEqual([]);

    // Named once each over four polls, with its path and why, and counted in the run that named it.
    const named = refusals(lines);
    expect(named.map((l) => l.file).sort()).toEqual(['contacts-2026.csv', 'contacts.csv']);
    const of = (file: string) => named.find((l) => l.file === file)!;
    expect(of('contacts-2026.csv')).toMatchObject({ level: 'error', path: join(dir, 'contacts-2026.csv') });
    expect(of('contacts-2026.csv').reason).toMatch(DIRECTORY);
    expect(of('contacts.csv')).toMatchObject({ level: 'error', path: join(dir, 'contacts.csv') });
    expect(of('contacts.csv').reason).toMatch(PIPE);
    expect(runs.map((run) => run.counts.files_refused)).toEqual([2, undefined, undefined, undefined]);
    expect(runs.map((run) => run.counts.files_processed)).toEqual([undefined, 1, undefined, undefined]);
  });

  it('names an entry again once another is put under its name, and takes a file dropped where a directory was', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-replaced-'));
    await mkdir(join(dir, 'crm.csv'));
    const { log, lines } = capturedLog();
    const job = inboxJob(dir, log);
    await runOnce(job);
    await runOnce(job);
    expect(refusals(lines).map((l) => l.reason)).toEqual([expect.stringMatching(DIRECTORY)]);

    // Made before the directory goes, so it cannot be given the directory's inode.
    mkfifo(join(dir, '.pipe'));
    await rmdir(join(dir, 'crm.csv'));
    await rename(join(dir, '.pipe'), join(dir, 'crm.csv'));
    await runOnce(job);
    await runOnce(job);
    expect(refusals(lines).map((l) => l.reason)).toEqual([
      expect.stringMatching(DIRECTORY),
      expect.stringMatching(PIPE),
    ]);

    await rm(join(dir, 'crm.csv'));
    await writeFile(join(dir, 'crm.csv'), csv('replaced', 3));
    await runOnce(job);
    await runOnce(job);
    expect(await listing(join(dir, 'processed'))).toEqual(['crm.csv', 'crm.csv.rejects.csv']);
    expect(await emails('replaced')).toEqual(expected('replaced', 3));
    expect(refusals(lines)).toHaveLength(2);
  });

  it('leaves a pipe and a directory put into processing/ by hand, named once, and pushes the inbox after them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-processing-'));
    await mkdir(join(dir, 'processing'));
    mkfifo(join(dir, 'processing', 'stuck.csv'));
    await mkdir(join(dir, 'processing', 'stuck-dir.jsonl'));
    await writeFile(join(dir, 'after.csv'), csv('after', 2));
    const { log, lines } = capturedLog();
    const job = inboxJob(dir, log);
    for (let i = 0; i < 3; i++) await runOnce(job);

    expect(await listing(join(dir, 'processing'))).toEqual(['stuck-dir.jsonl', 'stuck.csv']);
    expect((await lstat(join(dir, 'processing', 'stuck.csv'))).isFIFO()).toBe(true);
    expect(await emails('after')).toEqual(expected('after', 2));
    const named = refusals(lines);
    expect(named.map((l) => l.path).sort()).toEqual([
      join(dir, 'processing', 'stuck-dir.jsonl'),
      join(dir, 'processing', 'stuck.csv'),
    ]);
  });

  it('says a link to a pipe points to one, and moves the link to failed/ without opening the pipe', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-inbox-pipelink-'));
    const elsewhere = await mkdtemp(join(tmpdir(), 'rm-inbox-pipe-'));
    mkfifo(join(elsewhere, 'feed.csv'));
    await symlink(join(elsewhere, 'feed.csv'), join(dir, 'feed.csv'));
    const { log, lines } = capturedLog();
    const job = inboxJob(dir, log);
    for (let i = 0; i < 2; i++) await runOnce(job);

    expect(await listing(join(dir, 'failed'))).toEqual(['feed.csv', 'feed.csv.rejects.csv']);
    expect((await lstat(join(elsewhere, 'feed.csv'))).isFIFO()).toBe(true);
    const reason = refusals(lines).find((l) => l.file === 'feed.csv')?.reason;
    expect(reason).toMatch(
      /^it is a symbolic link, to ".+" \(a named pipe\): the inbox takes regular files only/,
    );
    expect(
      parse(await readFile(join(dir, 'failed', 'feed.csv.rejects.csv'), 'utf8'), { columns: true }),
    ).toEqual([{ line: '', field: '', reason, key: '' }]);
  });
});
