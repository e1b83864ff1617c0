import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ContactMapping,
  configFileSchema,
  type EventRule,
  loadConfigFile,
} from '../../src/config/configFile.js';
import type { Db } from '../../src/db/connect.js';
import { runJob } from '../../src/jobs/runner.js';
import { SecretScrubber } from '../../src/log.js';
import { type Metrics, makeMetrics } from '../../src/metrics.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { contactsInboxJob } from '../../src/push/contacts/inbox.js';
import { freshDb } from '../helpers/db.js';
import { capturedLog, quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';

/**
 * The CRM inbox when a push fails: a file is parked in failed/ only for a fault of its own. The
 * soak found an export parked there because PostgreSQL restarted during its push, so its contacts
 * never reached the platform.
 */
describe('the CRM inbox when a push fails', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  let dir: string;
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 21 });
    db = await freshDb();
    api = testApi(sandbox);
    dir = await mkdtemp(join(tmpdir(), 'rm-inbox-failures-'));
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  const job = (
    over: {
      api?: PartnerApi;
      settleMs?: number;
      mapping?: ContactMapping;
      rules?: readonly EventRule[];
      ratePerSecond?: number;
      logRetentionDays?: number;
      log?: typeof quietLog;
      scrubber?: SecretScrubber;
      metrics?: Metrics;
    } = {},
  ) =>
    contactsInboxJob(
      {
        db,
        api: over.api ?? api,
        log: over.log ?? quietLog,
        scrubber: over.scrubber ?? new SecretScrubber(),
        metrics: over.metrics,
      },
      {
        dir,
        schedule: 'off',
        settleMs: over.settleMs ?? 0,
        mapping: over.mapping ?? loadConfigFile(undefined).contacts,
        rules: over.rules ?? [],
        push: {
          concurrency: 4,
          ratePerSecond: over.ratePerSecond ?? 1_000,
          logRetentionDays: over.logRetentionDays ?? 30,
        },
      },
    );
  // The same job across runs, as in `run`: a file is taken once it has not changed since the last.
  let inbox: ReturnType<typeof job> | undefined;
  /** A run of `inboxJob`: its outcome, or the error it failed with. */
  const outcomeOf = (inboxJob: ReturnType<typeof job>) =>
    runJob({ db, log: quietLog }, inboxJob, { wait: false }).then(
      (run) => run.outcome,
      (error: unknown) => error,
    );
  const runInbox = () => {
    inbox ??= job();
    return outcomeOf(inbox);
  };
  // Two runs: the first sees a file (again), the second takes it, unchanged since (settle 0).
  const takeSettled = async () => {
    expect(await runInbox()).toBe('success');
    expect(await runInbox()).toBe('success');
  };
  const where = async (name: string) => {
    for (const place of ['', 'processing', 'processed', 'failed']) {
      if ((await readdir(join(dir, place)).catch((): string[] => [])).includes(name)) return place || 'inbox';
    }
    return 'nowhere';
  };
  const onPlatform = async () => (await sandbox.control.truth(sandbox.companyId)).contacts.length;
  /** The rows of a report in failed/, as an operator's spreadsheet reads them. */
  const failedReport = async (name: string) =>
    parse(await readFile(join(dir, 'failed', `${name}.rejects.csv`), 'utf8'), { columns: true }) as Array<
      Record<string, string>
    >;
  /** A report's row saying why the file was refused as a whole: no line, no field. */
  const fileRow = (reason: string) => ({ line: '', field: '', reason, key: '' });

  it('leaves an export in place when the database fails its push, and pushes it at the next run', async () => {
    await writeFile(join(dir, 'crm.csv'), 'external_id,email,name\nx1,a@example.com,A\nx2,b@example.com,B\n');
    expect(await runInbox()).toBe('success');
    // The push's staging table gone: a failure of the database, not of the file.
    const staging = db.table('contact_push_staging');
    await db.knex.raw('alter table ?? rename to contact_push_staging_away', [staging]);
    const failed = await runInbox().finally(() =>
      db.knex.raw('alter table ?? rename to contact_push_staging', [db.table('contact_push_staging_away')]),
    );
    expect(failed).toBeInstanceOf(Error);
    // Taken, it stays in processing/, where a CRM dropping its next export cannot replace it.
    expect(await where('crm.csv')).toBe('processing');
    expect(await onPlatform()).toBe(0);
    // Pushed again by the next run, before any file of the inbox.
    await takeSettled();
    expect(await where('crm.csv')).toBe('processed');
    expect(await onPlatform()).toBe(2);
  });

  const contactPosts = async () =>
    Object.values((await sandbox.control.requests()).by_route['POST /api/v1/partner/contacts'] ?? {}).reduce(
      (a, b) => a + b,
      0,
    );
  const outcomes = async () => {
    const rows: Array<{ outcome: string; n: string }> = await db
      .knex(db.table('contacts'))
      .select('outcome')
      .count({ n: '*' })
      .groupBy('outcome');
    return Object.fromEntries(rows.map((r) => [r.outcome, Number(r.n)]));
  };
  const exportOf = (name: string, rows: number) =>
    writeFile(
      join(dir, name),
      `external_id,email\n${Array.from({ length: rows }, (_, i) => `${name}-${i},${name.replace('.csv', '')}-${i}@example.com`).join('\n')}\n`,
    );

  it('leaves an export in place while the platform fails its contacts, stopping after ten in a row', async () => {
    await exportOf('down.csv', 40);
    await sandbox.control.setFaults({ partner: { error500: 1, routes: ['/api/v1/partner/contacts'] } });
    expect(await runInbox()).toBe('success');
    const failed = await runInbox();
    expect(String(failed)).toMatch(
      /the platform failed 10 contacts in a row \(the last: POST \/contacts answered 500/,
    );
    expect(await where('down.csv')).toBe('processing');
    // Ten failed in a row, and at most the three others in flight then: the rest never sent.
    const stopped = await outcomes();
    expect(stopped.failed).toBeGreaterThanOrEqual(10);
    expect(stopped.failed).toBeLessThanOrEqual(13);
    expect(stopped.pending).toBe(40 - stopped.failed!);
    expect(await onPlatform()).toBe(2);

    await sandbox.control.setFaults({});
    await takeSettled();
    expect(await where('down.csv')).toBe('processed');
    expect(await onPlatform()).toBe(42);
  });

  it('stops a push at the first answer that the key is refused, and leaves the export in place', async () => {
    await exportOf('key.csv', 40);
    const badKey = testApi({ url: sandbox.url, apiKey: 'rm_revoked_key_0000' });
    const before = await contactPosts();
    try {
      const withBadKey = job({ api: badKey });
      const run = () => runJob({ db, log: quietLog }, withBadKey, { wait: false }).catch((e: unknown) => e);
      expect(await run()).toMatchObject({ outcome: 'success' });
      expect(String(await run())).toMatch(/the API key is missing, invalid or inactive/);
    } finally {
      await badKey.close();
    }
    expect(await where('key.csv')).toBe('processing');
    // The requests in flight when the first 401 came, no more.
    expect((await contactPosts()) - before).toBeLessThanOrEqual(4);
    await takeSettled();
    expect(await where('key.csv')).toBe('processed');
    expect(await onPlatform()).toBe(82);
  });

  for (const [status, fault] of [
    [429, 'error429'],
    [503, 'error503'],
  ] as const) {
    it(`stops a push at a ${status} whose Retry-After is longer than the retry budget, and leaves the export in place`, async () => {
      const [held, later] = [`held-${status}.csv`, `held-${status}-later.csv`];
      await exportOf(held, 40);
      const before = { posts: await contactPosts(), onPlatform: await onPlatform() };
      await sandbox.control.setFaults({
        partner: { [fault]: 1, retryAfterSeconds: 3_600, routes: ['/api/v1/partner/contacts'] },
      });
      expect(await runInbox()).toBe('success');
      const stopped = String(await runInbox());
      expect(stopped).toContain(
        `the platform answered ${status} with a Retry-After of 3600 s, past what the client's retries wait`,
      );
      expect(stopped).toContain('the push stops');
      expect(await where(held)).toBe('processing');
      // The requests in flight when the first such answer came, no more: not one contact after another.
      const sent = (await contactPosts()) - before.posts;
      expect(sent).toBeLessThanOrEqual(4);
      // Nor again at the next polls: the inbox keeps to the Retry-After, whatever it finds.
      await exportOf(later, 3);
      for (let poll = 0; poll < 3; poll++) {
        const notPushed = String(await runInbox());
        expect(notPushed).toContain(`${held} not pushed: the platform asked for no contacts before `);
        expect(notPushed).toContain(`(the Retry-After of a ${status})`);
      }
      expect((await contactPosts()) - before.posts).toBe(sent);
      expect(await where(later)).toBe('inbox');
      await sandbox.control.setFaults({});
      // An hour later, as a restart would: in memory only (the inbox's and the client's).
      inbox = undefined;
      await api.close();
      api = testApi(sandbox);
      await takeSettled();
      expect(await where(later)).toBe('processed');
      expect(await where(held)).toBe('processed');
      expect(await onPlatform()).toBe(before.onPlatform + 43);
    });
  }

  it('parks in failed/ an export without a column its mapping names, sending none of it', async () => {
    await writeFile(join(dir, 'renamed.csv'), 'CRM Id,email\ny1,q@example.com\n');
    const mapping = configFileSchema.parse({ contacts: { columns: { external_id: 'CRM ID' } } }).contacts;
    const renamed = job({ mapping });
    const before = await contactPosts();
    for (let i = 0; i < 2; i++) await runJob({ db, log: quietLog }, renamed, { wait: false });
    expect(await where('renamed.csv')).toBe('failed');
    expect((await contactPosts()) - before).toBe(0);
    expect(await failedReport('renamed.csv')).toEqual([
      fileRow(
        'the header has no column "CRM ID" (contacts.columns.external_id); its columns: "CRM Id", "email"',
      ),
    ]);
  });

  it('writes the reason a file was refused into its report scrubbed, as the log is', async () => {
    // An export whose header holds a secret of the daemon (pasted into a column name by mistake):
    // the refusal quotes the header.
    const secret = 'rm_live_0123456789abcdef';
    await writeFile(join(dir, 'leaky.csv'), `CRM Id,email,${secret}\ny1,q@example.com,x\n`);
    const mapping = configFileSchema.parse({ contacts: { columns: { external_id: 'CRM ID' } } }).contacts;
    const leaky = job({ mapping, scrubber: new SecretScrubber([secret]) });
    for (let i = 0; i < 2; i++) expect(await outcomeOf(leaky)).toBe('success');
    expect(await where('leaky.csv')).toBe('failed');
    expect(await failedReport('leaky.csv')).toEqual([
      fileRow(
        'the header has no column "CRM ID" (contacts.columns.external_id); its columns: "CRM Id", "email", "[REDACTED]"',
      ),
    ]);
  });

  it('fails the run, not the process, when the report beside an export cannot be written', async () => {
    await exportOf('report.csv', 3);
    // A directory where the report goes: its stream fails as on a full disk or a read-only mount.
    await mkdir(join(dir, 'processing', 'report.csv.rejects.csv'));
    expect(await runInbox()).toBe('success');
    expect(String(await runInbox())).toMatch(
      /the report .*report\.csv\.rejects\.csv could not be written: EISDIR/,
    );
    expect(await where('report.csv')).toBe('processing');
    await rm(join(dir, 'processing', 'report.csv.rejects.csv'), { recursive: true });
    await takeSettled();
    expect(await where('report.csv')).toBe('processed');
  });

  it('lets a file written during a long push settle from when it was seen changing, not from the run start', async () => {
    // Thirty contacts at ten a second: a push of about three seconds.
    const slow = job({ settleMs: 1_500, ratePerSecond: 10 });
    const run = () => runJob({ db, log: quietLog }, slow, { wait: false });
    await exportOf('a-long.csv', 30);
    await exportOf('b-growing.csv', 1);
    await run();
    await new Promise((resolve) => setTimeout(resolve, 1_600));
    // While a-long.csv is pushed, the CRM is still writing b-growing.csv.
    const writing = new Promise((resolve) => setTimeout(resolve, 500)).then(() =>
      exportOf('b-growing.csv', 2),
    );
    await run();
    await writing;
    expect(await where('a-long.csv')).toBe('processed');
    // Seen changing at the end of that run, a moment ago: not settled yet.
    await run();
    expect(await where('b-growing.csv')).toBe('inbox');
    await new Promise((resolve) => setTimeout(resolve, 1_600));
    await run();
    expect(await where('b-growing.csv')).toBe('processed');
  });

  it('keeps each export of a name the CRM reuses, beside the earlier ones', async () => {
    for (const rows of [1, 2]) {
      await exportOf('daily.csv', rows);
      await takeSettled();
    }
    const kept = (await readdir(join(dir, 'processed'))).filter((n) => n.startsWith('daily.'));
    expect(kept.sort()).toEqual([
      expect.stringMatching(/^daily\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.csv$/),
      expect.stringMatching(/^daily\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.csv\.rejects\.csv$/),
      'daily.csv',
      'daily.csv.rejects.csv',
    ]);
  });

  it('never replaces a report kept in failed/ without its export, moving an export of its name there', async () => {
    // An earlier export's report, kept after its export was removed by hand.
    const kept = 'line,field,reason,key\n2,email,kept by the operator,\n';
    await writeFile(join(dir, 'failed', 'monday.csv.rejects.csv'), kept);
    await writeFile(join(dir, 'monday.csv'), 'external_id,email\nm1,not-an-email\n');
    await takeSettled();
    expect(await readFile(join(dir, 'failed', 'monday.csv.rejects.csv'), 'utf8')).toBe(kept);
    const moved = (await readdir(join(dir, 'failed'))).filter((n) => n.startsWith('monday.')).sort();
    expect(moved).toEqual([
      expect.stringMatching(/^monday\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.csv$/),
      `${moved[0]}.rejects.csv`,
      'monday.csv.rejects.csv',
    ]);
    expect((await failedReport(moved[0]!)).at(-1)).toEqual(
      fileRow('its one row was rejected, nothing of it was pushed: see the rows above for why'),
    );
  });

  /**
   * The sandbox behind a forwarding server, over real HTTP: `instead` may answer a request itself
   * with an error status (and `answerHeaders`); everything else is passed on. `taken` counts, by email,
   * the contacts the sandbox accepted through it. Its client is its own, so a Retry-After it meets
   * holds no other test's requests.
   */
  const forwarding = async (
    instead: (req: IncomingMessage, body: string) => number | undefined,
    answerHeaders: Record<string, string> = {},
  ) => {
    const taken = new Map<string, number>();
    const server: Server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const status = instead(req, body.toString());
        if (status !== undefined) {
          res
            .writeHead(status, { 'content-type': 'application/json', ...answerHeaders })
            .end('{"error":"Internal server error"}');
          return;
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
            if (req.method === 'POST' && req.url?.endsWith('/contacts') && answer.ok) {
              const { email } = JSON.parse(body.toString()) as { email: string };
              taken.set(email, (taken.get(email) ?? 0) + 1);
            }
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
    const proxyApi = testApi({
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      apiKey: sandbox.apiKey,
    });
    return {
      api: proxyApi,
      taken,
      close: async () => {
        await proxyApi.close();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      },
    };
  };
  const isContactPost = (req: IncomingMessage) =>
    req.method === 'POST' && req.url?.endsWith('/contacts') === true;
  /** One contact (by its email) always answered 500: a record the platform chokes on. */
  const chokingOn = (email: string) =>
    forwarding((req, body) => (isContactPost(req) && body.includes(email) ? 500 : undefined));
  const logOf = async (key: string) =>
    db
      .knex(db.table('contact_push_log'))
      .where({ key })
      .orderBy('id')
      .select('file', 'operation', 'outcome', 'error');

  it('fails a contact the platform answers 5xx on three pushes in a row, and moves its export on', async () => {
    const choking = await chokingOn('poison@example.com');
    try {
      const withChoking = job({ api: choking.api });
      const run = () => outcomeOf(withChoking);
      const before = await onPlatform();
      await writeFile(
        join(dir, 'choke.csv'),
        'external_id,email\nc1,c1@example.com\npoison,poison@example.com\nc2,c2@example.com\n',
      );
      expect(await run()).toBe('success');
      // Two pushes: the others go through, the poisoned one is taken for the platform unavailable.
      for (let push = 1; push <= 2; push++) {
        expect(String(await run())).toMatch(/1 contacts of choke\.csv were not sent/);
        expect(await where('choke.csv')).toBe('processing');
      }
      expect(await onPlatform()).toBe(before + 2);
      // The third push in a row: failed for that contact alone, and the export moves on.
      expect(await run()).toBe('success');
      expect(await where('choke.csv')).toBe('failed');
      expect(await where('choke.csv.rejects.csv')).toBe('failed');
      const log = await logOf('poison');
      expect(log.map((l) => l.outcome)).toEqual(['failed', 'failed', 'failed']);
      expect(log[2]!.error).toMatch(
        /^the platform answered 5xx on 3 pushes in a row while it answered otherwise \(the last: POST \/contacts answered 500/,
      );
      // Given up: its streak stays at the limit, which tells it given up.
      const stored = await db.knex(db.table('contacts')).where({ key: 'poison' }).first();
      expect(stored).toMatchObject({ outcome: 'failed', unavailable_pushes: 3 });
      // A later export holding it unchanged beside a contact the platform takes: not sent again
      // (it would begin a streak afresh and hold the export three pushes more), failed as it was,
      // and the export is done at its first push: nothing of it failed this time (its report
      // names the contact given up, so no daily export holding it lands in failed/).
      await writeFile(
        join(dir, 'choke-again.csv'),
        'external_id,email\nc3,c3@example.com\npoison,poison@example.com\n',
      );
      const posted = choking.taken.get('poison@example.com');
      expect(await run()).toBe('success');
      expect(await run()).toBe('success');
      expect(await where('choke-again.csv')).toBe('processed');
      expect(await onPlatform()).toBe(before + 3);
      expect(choking.taken.get('poison@example.com')).toBe(posted);
      const again = await logOf('poison');
      expect(again.map((l) => [l.operation, l.outcome])).toEqual([
        ['create', 'failed'],
        ['retry', 'failed'],
        ['retry', 'failed'],
        ['given_up', 'failed'],
      ]);
      expect(again[3]!.error).toMatch(
        /^not sent: given up on an earlier push, and unchanged since \(the platform answered 5xx on 3 pushes/,
      );
    } finally {
      await choking.close();
    }
    // Unchanged, it is not sent even once the platform would take it...
    await writeFile(join(dir, 'choke-later.csv'), 'external_id,email\npoison,poison@example.com\n');
    const before = await onPlatform();
    await takeSettled();
    expect(await where('choke-later.csv')).toBe('processed');
    expect(await onPlatform()).toBe(before);
    // ...until an export changes it: then it is sent, and its streak ends.
    await writeFile(join(dir, 'choke-changed.csv'), 'external_id,email,name\npoison,poison@example.com,Po\n');
    await takeSettled();
    expect(await where('choke-changed.csv')).toBe('processed');
    expect(await onPlatform()).toBe(before + 1);
    expect(await db.knex(db.table('contacts')).where({ key: 'poison' }).first()).toMatchObject({
      outcome: 'sent',
      unavailable_pushes: 0,
      unavailable_since: null,
    });
  });

  it('leaves a small export in place for as long as the platform fails all of its contacts', async () => {
    await exportOf('small.csv', 3);
    await sandbox.control.setFaults({ partner: { error500: 1, routes: ['/api/v1/partner/contacts'] } });
    try {
      expect(await runInbox()).toBe('success');
      for (let push = 1; push <= 4; push++) {
        expect(String(await runInbox())).toMatch(/3 contacts of small\.csv were not sent/);
        expect(await where('small.csv')).toBe('processing');
      }
    } finally {
      await sandbox.control.setFaults({});
    }
    const before = await onPlatform();
    expect(await runInbox()).toBe('success');
    expect(await where('small.csv')).toBe('processed');
    expect(await onPlatform()).toBe(before + 3);
  });

  it('gives no contact up while the platform is down, though it took others before the outage began', async () => {
    // The platform goes down for good mid-push, after taking five contacts: from then on every
    // request, a GET of the review feed too, is answered 503.
    let posts = 0;
    let platform: 'up' | 'down' | 'back' = 'up';
    const outage = await forwarding((req) => {
      if (platform === 'up' && isContactPost(req) && ++posts > 5) platform = 'down';
      return platform === 'down' ? 503 : undefined;
    });
    try {
      const withOutage = job({ api: outage.api });
      const run = () => outcomeOf(withOutage);
      const before = await onPlatform();
      await exportOf('outage.csv', 8);
      expect(await run()).toBe('success');
      // The push the outage began in, then three more with the platform down: the successes of
      // the first are no proof that it is up at the third, so the export stays.
      for (let push = 1; push <= 4; push++) {
        expect(String(await run()), `push ${push}`).toMatch(/3 contacts of outage\.csv were not sent/);
        expect(await where('outage.csv')).toBe('processing');
      }
      expect(await onPlatform()).toBe(before + 5);
      const left = await db
        .knex(db.table('contacts'))
        .where('key', 'like', 'outage.csv-%')
        .andWhere({ outcome: 'failed' })
        .select('unavailable_pushes');
      // Not given up: held one push short of the limit, however many pushes the outage lasts.
      expect(left).toEqual([1, 2, 3].map(() => ({ unavailable_pushes: 2 })));
      const givenUp = await db
        .knex(db.table('contact_push_log'))
        .where('key', 'like', 'outage.csv-%')
        .andWhere('error', 'like', '%pushes in a row%');
      expect(givenUp).toEqual([]);

      // Back up: the export is pushed, and each of its contacts reached the platform once.
      platform = 'back';
      expect(await run()).toBe('success');
      expect(await where('outage.csv')).toBe('processed');
      expect(await onPlatform()).toBe(before + 8);
      expect([...outage.taken.entries()].sort()).toEqual(
        Array.from({ length: 8 }, (_, i) => [`outage-${i}@example.com`, 1]),
      );
    } finally {
      await outage.close();
    }
  });

  const enqueued = async (key: string) =>
    Number((await db.knex(db.table('events_outbox')).where('idempotency_key', key).count({ n: '*' }))[0]!.n);
  const eventsFile = (name: string, key: string, email: string) =>
    writeFile(join(dir, name), `event_id,email,event_type\n${key},${email},matter.closed\n`);

  it('enqueues the events files while the platform holds contacts off, and keeps the contacts exports waiting', async () => {
    let posts = 0;
    const holding = await forwarding(
      (req) => {
        if (!isContactPost(req)) return undefined;
        posts++;
        return 429;
      },
      { 'retry-after': '3600' },
    );
    try {
      const withHold = job({ api: holding.api });
      const run = () => outcomeOf(withHold);
      await exportOf('hold-a.csv', 2);
      expect(await run()).toBe('success');
      expect(String(await run())).toContain('the platform answered 429 with a Retry-After of 3600 s');
      const sent = posts;
      // Lifecycle events dropped during the hold: they ask nothing of the contacts route.
      await eventsFile('events-hold.csv', 'hold-closed-1', 'hold-a-0@example.com');
      await exportOf('hold-b.csv', 1);
      for (let poll = 0; poll < 2; poll++) {
        expect(String(await run())).toContain(
          'hold-a.csv not pushed: the platform asked for no contacts before',
        );
      }
      expect(await where('events-hold.csv')).toBe('processed');
      expect(await enqueued('hold-closed-1')).toBe(1);
      expect(await where('hold-a.csv')).toBe('processing');
      expect(await where('hold-b.csv')).toBe('inbox');
      expect(posts).toBe(sent);
    } finally {
      await holding.close();
    }
    // A restart, an hour later: the export held is pushed first, then the one that waited behind it.
    const before = await onPlatform();
    await takeSettled();
    expect(await where('hold-a.csv')).toBe('processed');
    expect(await where('hold-b.csv')).toBe('processed');
    expect(await onPlatform()).toBe(before + 3);
  });

  it('enqueues the events file after a contacts export the platform is down for, in the same run, and keeps the contacts exports after it', async () => {
    // Dropped together, taken by name: the first export fails, the second waits behind it, and the
    // events file after both is enqueued all the same.
    await exportOf('down-a.csv', 3);
    await exportOf('down-b.csv', 1);
    await eventsFile('events-down.csv', 'down-closed-1', 'down-a-0@example.com');
    await sandbox.control.setFaults({ partner: { error500: 1, routes: ['/api/v1/partner/contacts'] } });
    try {
      expect(await runInbox()).toBe('success');
      expect(String(await runInbox())).toMatch(/3 contacts of down-a\.csv were not sent/);
      expect(await where('events-down.csv')).toBe('processed');
      expect(await enqueued('down-closed-1')).toBe(1);
      expect(await where('down-a.csv')).toBe('processing');
      expect(await where('down-b.csv')).toBe('inbox');
    } finally {
      await sandbox.control.setFaults({});
    }
    const before = await onPlatform();
    expect(await runInbox()).toBe('success');
    expect(await where('down-a.csv')).toBe('processed');
    expect(await where('down-b.csv')).toBe('processed');
    expect(await onPlatform()).toBe(before + 4);
  });

  it('holds contacts off for an hour at most, whatever Retry-After the platform sends', async () => {
    const forever = await forwarding((req) => (isContactPost(req) ? 429 : undefined), {
      'retry-after': '99999999999999999',
    });
    try {
      const withForever = job({ api: forever.api });
      const run = () => outcomeOf(withForever);
      await exportOf('forever.csv', 2);
      expect(await run()).toBe('success');
      expect(String(await run())).toContain('the platform answered 429 with a Retry-After of');
      const asked = Date.now();
      const notPushed = String(await run());
      const until =
        /forever\.csv not pushed: the platform asked for no contacts before (\S+) \(the Retry-After of a 429\)/.exec(
          notPushed,
        );
      expect(until, notPushed).not.toBeNull();
      expect(Date.parse(until![1]!)).toBeLessThanOrEqual(asked + 60 * 60_000);
      expect(await where('forever.csv')).toBe('processing');
    } finally {
      await forever.close();
    }
    expect(await runInbox()).toBe('success');
    expect(await where('forever.csv')).toBe('processed');
  });

  it('parks in failed/ an export that cannot be read as one, and goes on', async () => {
    await writeFile(join(dir, 'twice.csv'), 'email,email\na@example.com,b@example.com\n');
    await takeSettled();
    expect(await where('twice.csv')).toBe('failed');
  });

  const emailsOnPlatform = async (prefix: string) =>
    (await sandbox.control.truth(sandbox.companyId)).contacts
      .map((c) => c.email)
      .filter((e) => e?.startsWith(prefix))
      .sort();

  it('never parks in failed/ an export it pushed because the housekeeping after the push failed', async () => {
    await writeFile(
      join(dir, 'pruned.csv'),
      'external_id,email\np1,pruned-1@example.com\np2,pruned-2@example.com\n',
    );
    // The push log's prune after the push fails with a data error (22008, timestamp out of range):
    // the database's, not the file's, whose contacts are all on the platform by then. The push's
    // outcome stands, and the failure is logged.
    const { log, lines } = capturedLog();
    const metrics = makeMetrics();
    const pruneFails = job({ logRetentionDays: 999_999_999, log, metrics });
    expect(await outcomeOf(pruneFails)).toBe('success');
    expect(await outcomeOf(pruneFails)).toBe('success');
    expect(await emailsOnPlatform('pruned-')).toEqual(['pruned-1@example.com', 'pruned-2@example.com']);
    expect(await where('pruned.csv')).toBe('processed');
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 'error',
        msg: 'could not prune the contacts push log',
        err: expect.stringMatching(/timestamp out of range/),
      }),
    );
    expect(lines.filter((line) => line.msg === 'CRM export could not be pushed')).toEqual([]);
    // Counted, for the alert on prunes that keep failing: once per push that pruned.
    const failures = (await metrics.pruneFailures.get()).values;
    expect(failures.find((v) => v.labels.table === 'contact_push_log')?.value).toBeGreaterThanOrEqual(1);
  });

  it('fails the run, leaving the export in processing/, on a TypeError that is no fault of the file', async () => {
    await writeFile(join(dir, 'typed.csv'), 'external_id,email\nt1,typed-1@example.com\n');
    // A wiring bug of the program (rules that are no list): a TypeError before a row is read.
    const miswired = job({ rules: {} as unknown as EventRule[] });
    expect(await outcomeOf(miswired)).toBe('success');
    expect(await outcomeOf(miswired)).toBeInstanceOf(TypeError);
    expect(await where('typed.csv')).toBe('processing');
    expect(await runInbox()).toBe('success');
    expect(await where('typed.csv')).toBe('processed');
    expect(await emailsOnPlatform('typed-')).toEqual(['typed-1@example.com']);
  });

  it('parks in failed/ an events file without a column every event needs, naming the columns', async () => {
    await writeFile(join(dir, 'events-renamed.csv'), 'id,email,type\ne1,r1@example.com,matter.closed\n');
    await writeFile(
      join(dir, 'events-no-recipient.csv'),
      'event_id,event_type,phone\ne2,matter.closed,555\n',
    );
    const { log, lines } = capturedLog();
    const logged = job({ log });
    for (let i = 0; i < 2; i++) expect(await outcomeOf(logged)).toBe('success');
    expect(await where('events-renamed.csv')).toBe('failed');
    expect(await where('events-no-recipient.csv')).toBe('failed');
    expect(lines).toContainEqual(
      expect.objectContaining({
        file: 'events-renamed.csv',
        moved: 'failed',
        reason:
          'the header has no columns "event_id" (the key that makes the event sent once), "event_type" (the type of the event); its columns: "id", "email", "type"',
      }),
    );
    expect(lines).toContainEqual(
      expect.objectContaining({
        file: 'events-no-recipient.csv',
        moved: 'failed',
        reason: `the header has no column "email" or "contact_id" (the event's recipient); its columns: "event_id", "event_type", "phone"`,
      }),
    );
    expect(await failedReport('events-no-recipient.csv')).toEqual([
      fileRow(
        `the header has no column "email" or "contact_id" (the event's recipient); its columns: "event_id", "event_type", "phone"`,
      ),
    ]);
  });

  it('parks in failed/ a file none of whose rows could be taken, events or contacts, and counts it failed', async () => {
    // JSON Lines are not checked for columns: every line without its event_id is rejected.
    await writeFile(
      join(dir, 'events-nokeys.jsonl'),
      '{"id":"k1","email":"n1@example.com","event_type":"matter.closed"}\n{"id":"k2","email":"n2@example.com","event_type":"matter.closed"}\n',
    );
    await writeFile(join(dir, 'rejected-all.csv'), 'external_id,email\nr1,not-an-email\nr2,\n');
    // One row taken: pushed, its rejected row in the report, as ever.
    await writeFile(join(dir, 'rejected-one.csv'), 'external_id,email\nr3,rejected-3@example.com\nr4,nope\n');
    const { log, lines } = capturedLog();
    const logged = job({ log });
    expect(await outcomeOf(logged)).toBe('success');
    const run = await runJob({ db, log: quietLog }, logged, { wait: false });
    expect(run.outcome).toBe('success');
    expect(run.counts).toMatchObject({ files_failed: 2, files_processed: 1 });
    expect(await where('events-nokeys.jsonl')).toBe('failed');
    expect(await where('events-nokeys.jsonl.rejects.csv')).toBe('failed');
    expect(await where('rejected-all.csv')).toBe('failed');
    expect(await where('rejected-one.csv')).toBe('processed');
    expect(await emailsOnPlatform('rejected-')).toEqual(['rejected-3@example.com']);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 'error',
        msg: 'CRM export could not be pushed',
        file: 'events-nokeys.jsonl',
        read: 2,
        rejected: 2,
        moved: 'failed',
        reason:
          'every one of its 2 rows was rejected, nothing of it was pushed: see its .rejects.csv report for why',
      }),
    );
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 'error', file: 'rejected-all.csv', moved: 'failed' }),
    );
    // After the rows' own reasons, the file's: why none of it was pushed.
    const report = await failedReport('rejected-all.csv');
    expect(report.map((row) => row.line)).toEqual(['2', '3', '']);
    expect(report.at(-1)).toEqual(
      fileRow('every one of its 2 rows was rejected, nothing of it was pushed: see the rows above for why'),
    );
  });
});
