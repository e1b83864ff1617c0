import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { CliProcess, cliEnv, runCli, waitForHttp } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { seededDataDir } from '../helpers/embeddedTemplate.js';
import { scrapeMetrics } from '../helpers/metrics.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The outbox from the partner's side: `enqueue_event` in the application's own transaction on the
 * real PostgreSQL server (a second process cannot open the embedded database), the daemon woken
 * by NOTIFY, and the CLI.
 */
const POSTGRES = TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

describe('the events outbox', () => {
  let sandbox: TestSandbox;
  const dbs: Db[] = [];
  const schemas: string[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 21 });
  });
  afterAll(async () => {
    await sandbox?.close();
    for (const db of dbs) await db.close();
    for (const schema of schemas) await dropSchema(schema, POSTGRES);
  });

  const eventsByKey = async () => {
    const counts = new Map<string, number>();
    for (const e of (await sandbox.control.truth(sandbox.companyId)).events) {
      const key = String(e.metadata?.k ?? '');
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return counts;
  };

  it('sends an event committed in the partner transaction once, woken by NOTIFY; a rolled-back one never', async () => {
    // The poll is an hour away: only the notification can make the daemon send within the test.
    const setup = await daemonSetup(sandbox, {
      DATABASE_URL: POSTGRES,
      SYNC_REVIEWS_CRON: 'off',
      SYNC_DIRECTORY_CRON: 'off',
      EVENTS_POLL_SECONDS: '3600',
    });
    schemas.push(setup.schema);
    const daemon = new CliProcess(['run'], setup.env);
    try {
      await waitForHttp(`http://127.0.0.1:${setup.adminPort}/healthz`, 30_000);
      const db = await openDb({ url: POSTGRES, schema: setup.schema, poolMax: 2, dataDir: undefined });
      dbs.push(db);
      const enqueue = `select ??(?, ?, ?, ?::jsonb) as enqueued`;
      const fn = `${setup.schema}.enqueue_event`;
      await db.knex
        .transaction(async (trx) => {
          await trx.raw(enqueue, [
            fn,
            'rolled@example.com',
            'matter.closed',
            'rolled-back',
            '{"k":"rolled-back"}',
          ]);
          throw new Error('the business change failed');
        })
        .catch(() => {});
      await db.knex.transaction(async (trx) => {
        await trx.raw('select 1'); // the partner's own business change would be here
        await trx.raw(enqueue, [
          fn,
          'done@example.com',
          'matter.closed',
          'matter-42-closed',
          '{"k":"matter-42"}',
        ]);
      });
      await waitFor(async () => (await eventsByKey()).get('matter-42') === 1, 15_000, 10);

      const again = await db.knex.raw(enqueue, [
        fn,
        'done@example.com',
        'matter.closed',
        'matter-42-closed',
        null,
      ]);
      expect(again.rows[0].enqueued).toBe(false);
      await sleep(1_000);
      const counts = await eventsByKey();
      expect(counts.get('matter-42')).toBe(1);
      expect(counts.has('rolled-back')).toBe(false);
      const row = await db
        .knex(db.table('events_outbox'))
        .where({ idempotency_key: 'matter-42-closed' })
        .first();
      expect(row).toMatchObject({ state: 'sent', source: 'sql', attempts: 1, platform_status: 'queued' });
      expect(row.platform_event_id).not.toBeNull();

      const sample = await scrapeMetrics(setup.adminPort);
      expect(sample('review_mirror_events_total{outcome="sent"}')).toBe(1);
      expect(sample('review_mirror_event_enqueue_to_accepted_seconds_count')).toBe(1);
      expect(sample('review_mirror_outbox_backlog')).toBe(0);
      expect(sample('review_mirror_outbox_oldest_pending_seconds')).toBe(0);
    } finally {
      daemon.kill('SIGTERM');
      await daemon.exited;
    }
  });

  describe('from the CLI', () => {
    const schema = uniqueSchema('evcli');
    let env: NodeJS.ProcessEnv;
    let dir: string;
    beforeAll(async () => {
      schemas.push(schema);
      dir = await mkdtemp(join(tmpdir(), 'rm-events-'));
      if (!TEST_DATABASE_URL) await seededDataDir(join(dir, 'data'));
      env = cliEnv({
        REVIEWS_API_URL: sandbox.url,
        REVIEWS_API_KEY: sandbox.apiKey,
        DATABASE_URL: TEST_DATABASE_URL,
        DATA_DIR: join(dir, 'data'),
        DB_SCHEMA: schema,
        EVENTS_RATE_PER_SECOND: '1000',
      });
    });

    it('sends each event of a file once however often the file is pushed, and reports bad rows', async () => {
      const file = join(dir, 'events.csv');
      const rows = Array.from(
        { length: 50 },
        (_, i) => `ev-${i},p${i}@example.com,appointment.completed,"{""k"":""file-${i}""}"`,
      );
      await writeFile(
        file,
        // The last rows' metadata jsonb cannot hold (U+0000, half a character) or is over 16 KiB:
        // each refused alone, not the file.
        `event_id,email,event_type,metadata\n${rows.join('\n')}\n,nokey@example.com,appointment.completed,\nev-bad,someone@example.com,not a type,\nev-nul,nul@example.com,appointment.completed,"{""k"":""\\u0000""}"\nev-cut,cut@example.com,appointment.completed,"{""\\ud83d"":1}"\nev-big,big@example.com,appointment.completed,"{""k"":""${'x'.repeat(17_000)}""}"\n`,
      );
      for (let drop = 0; drop < 3; drop++) {
        const pushed = await runCli(['events', 'push', file], env);
        expect(pushed.code).toBe(0);
        expect(pushed.stdout).toContain(
          drop === 0
            ? 'read=55 enqueued=50 already_known=0 rejected=5'
            : 'read=55 enqueued=0 already_known=50 rejected=5',
        );
        const flushed = await runCli(['events', 'flush'], env);
        expect(flushed.stdout).toContain(`sent=${drop === 0 ? 50 : 0} retried=0 failed=0`);
      }
      const counts = await eventsByKey();
      for (let i = 0; i < 50; i++) expect(counts.get(`file-${i}`)).toBe(1);
      const report = (await readFile(`${file}.rejects.csv`, 'utf8')).trim().split('\n').slice(1);
      expect(report).toEqual([
        '52,event_id,is missing (the key that makes the event sent once),',
        '53,event_type,must be a dotted name such as matter.closed,',
        '54,metadata,"holds a NUL character (U+0000), which cannot be stored",',
        '55,metadata,"holds half of a character (a lone UTF-16 surrogate), which cannot be stored",',
        '56,metadata,"is 17009 bytes of JSON, more than 16384 (16 KiB): send what the campaign needs (ids, names, a date), not documents",',
      ]);
    });

    it('send: one event, recognised when sent again; a bad one refused with its field', async () => {
      const send = (...args: string[]) => runCli(['events', 'send', ...args], env);
      const first = await send(
        '--email',
        'cli@example.com',
        '--type',
        'review.requested',
        '--metadata',
        '{"k":"cli-1"}',
      );
      expect(first.stdout).toMatch(/^enqueued derived:[0-9a-f]{40}\n$/);
      const second = await send(
        '--email',
        'cli@example.com',
        '--type',
        'review.requested',
        '--metadata',
        '{"k":"cli-1"}',
      );
      expect(second.stdout).toMatch(/^already known: derived:/);
      const bad = await send('--email', 'cli@example.com', '--type', 'review.requested', '--metadata', '[1]');
      expect(bad.code).toBe(1);
      expect(bad.stderr).toBe('review-mirror: events send: metadata must be a JSON object\n');
      expect((await runCli(['events', 'flush'], env)).stdout).toContain('sent=1 ');
      expect((await eventsByKey()).get('cli-1')).toBe(1);
    });

    it('parks an event whose answer was lost when so configured, for an operator to retry or discard', async () => {
      const parkEnv = { ...env, EVENTS_UNKNOWN_OUTCOME: 'park', API_REQUEST_TIMEOUT_SECONDS: '1' };
      for (const k of ['lost-1', 'lost-2']) {
        await runCli(
          [
            'events',
            'send',
            '--key',
            k,
            '--email',
            `${k}@example.com`,
            '--type',
            'matter.closed',
            '--metadata',
            `{"k":"${k}"}`,
          ],
          env,
        );
      }
      await sandbox.control.setFaults({ partner: { hang: 1, routes: ['/api/v1/partner/events'] } });
      try {
        const flushed = await runCli(['events', 'flush'], parkEnv);
        expect(flushed.stdout).toContain('sent=0 retried=0 failed=0 parked=2');
        expect(flushed.code).toBe(1);
      } finally {
        await sandbox.control.setFaults({});
      }
      const parked = JSON.parse(
        (await runCli(['events', 'list', '--state', 'parked', '--json'], env)).stdout,
      ) as Array<{
        idempotency_key: string;
        last_error: string;
      }>;
      expect(parked.map((p) => p.idempotency_key).sort()).toEqual(['lost-1', 'lost-2']);
      expect(parked[0]!.last_error).toMatch(
        /^outcome unknown, parked for an operator: POST \/events timed out/,
      );

      expect((await runCli(['events', 'retry', 'lost-1'], env)).stdout).toBe('lost-1: pending\n');
      expect((await runCli(['events', 'discard', 'lost-2'], env)).stdout).toBe('lost-2: failed\n');
      expect((await runCli(['events', 'flush'], env)).stdout).toContain('sent=1 ');
      const counts = await eventsByKey();
      expect(counts.get('lost-1')).toBe(1);
      expect(counts.has('lost-2')).toBe(false);
      const status = await runCli(['status'], env);
      expect(status.stdout).toContain('events outbox:');
      expect(status.stdout).toMatch(/backlog +0 \(pending 0, being sent 0; oldest pending 0 s\)/);
      expect(status.stdout).toMatch(/failed 1, parked 0/);
      const nothing = await runCli(['events', 'retry', 'no-such-key'], env);
      expect(nothing.stderr).toBe('review-mirror: events retry: no event has the key no-such-key\n');
    });

    it('parks a poison event whose worker dies on it every time at its second lapse: sent twice at most', {
      timeout: 60_000,
    }, async () => {
      // On the server whatever the suite's mode: the embedded database is not for SIGKILLed writers.
      const poisonSchema = uniqueSchema('evpoison');
      schemas.push(poisonSchema);
      const poisonEnv = {
        ...env,
        DATABASE_URL: POSTGRES,
        DB_SCHEMA: poisonSchema,
        EVENTS_LEASE_SECONDS: '2',
        API_REQUEST_TIMEOUT_SECONDS: '1',
        // Whatever attempts this allows, the event is sent at most twice.
        EVENTS_MAX_ATTEMPTS: '10',
      };
      const sent = await runCli(
        ['events', 'send', '--key', 'poison', '--email', 'poison@example.com', '--type', 'matter.closed'],
        poisonEnv,
      );
      expect(sent.stdout).toBe('enqueued poison\n');
      const posts = async () =>
        (await sandbox.control.requests()).by_route['POST /api/v1/partner/events']?.hang ?? 0;
      await sandbox.control.setFaults({ partner: { hang: 1, routes: ['/api/v1/partner/events'] } });
      try {
        const before = await posts();
        // The event kills its worker mid-request, twice: each claim lapses unanswered.
        for (let killed = 1; killed <= 2; killed++) {
          const worker = new CliProcess(['events', 'flush'], poisonEnv);
          await waitFor(async () => (await posts()) === before + killed, 15_000, 5);
          worker.kill('SIGKILL');
          await worker.exited;
          await sleep(2_500);
        }
        // The next worker takes the second lapsed claim back: the event was already sent again
        // after an unknown outcome (the first lapse), so it is parked, not sent a third time.
        const flushed = await runCli(['events', 'flush'], poisonEnv);
        expect(flushed.stdout).toContain('sent=0 retried=0 failed=0 parked=1 possible_duplicates=0');
        expect(await posts()).toBe(before + 2);
      } finally {
        await sandbox.control.setFaults({});
      }
      const [row] = JSON.parse((await runCli(['events', 'list', '--json'], poisonEnv)).stdout) as Array<{
        state: string;
        attempts: number;
        last_error: string;
      }>;
      expect(row).toMatchObject({ state: 'parked', attempts: 2, possible_duplicate: true });
      expect(row!.last_error).toMatch(
        /^outcome unknown again after it was sent again .*claims lapsed 2 times/,
      );
    });

    it('fires a CRM rule once per contact and value, not again when the export is imported again', async () => {
      const config = join(dir, 'rules.yaml');
      await writeFile(
        config,
        'events:\n  rules:\n    - { name: closed, column: status, equals: closed, event_type: matter.closed }\n',
      );
      const rulesEnv = { ...env, REVIEW_MIRROR_CONFIG: config, CONTACTS_RATE_PER_SECOND: '1000' };
      const csv = (statuses: string[]) =>
        `external_id,email,name,status\n${statuses.map((s, i) => `r-${i},r${i}@example.com,R ${i},${s}`).join('\n')}\n`;
      const matterClosed = async () =>
        (await sandbox.control.truth(sandbox.companyId)).events.filter(
          (e) => e.event_type === 'matter.closed' && e.metadata?.rule === 'closed',
        );
      const push = async (name: string, statuses: string[]) => {
        const file = join(dir, name);
        await writeFile(file, csv(statuses));
        const result = await runCli(['contacts', 'push', file], rulesEnv);
        expect(result.code).toBe(0);
        await runCli(['events', 'flush'], rulesEnv);
        return result.stdout;
      };
      expect(await push('crm-1.csv', ['open', 'closed', 'open'])).toContain('events=1');
      expect(await push('crm-2.csv', ['open', 'closed', 'open'])).toContain('events=0');
      expect(await push('crm-3.csv', ['closed', 'closed', 'open'])).toContain('events=1');
      const fired = await matterClosed();
      expect(fired.map((e) => e.email).sort()).toEqual(['r0@example.com', 'r1@example.com']);
    });

    it('never sends metadata it cannot carry exactly, from a file or from SQL, and takes a key with blanks as the same event', async () => {
      const deep = `${'{""a"":'.repeat(40)}1${'}'.repeat(40)}`;
      const file = join(dir, 'unsendable.csv');
      await writeFile(
        file,
        `event_id,email,event_type,metadata\nk9,gil@example.com,matter.closed,"{""k"":""trimmed""}"\n"k9 ",gil@example.com,matter.closed,"{""k"":""trimmed""}"\n" k9",gil@example.com,matter.closed,"{""k"":""trimmed""}"\nev-deep,deep@example.com,matter.closed,"${deep}"\nev-int,int@example.com,matter.closed,"{""matter_id"":9007199254740993}"\n`,
      );
      const pushed = await runCli(['events', 'push', file], env);
      expect(pushed.stdout).toContain('enqueued=1 ');
      expect(pushed.stdout).toContain('rejected=2');
      const report = (await readFile(`${file}.rejects.csv`, 'utf8')).trim().split('\n').slice(1);
      expect(report).toEqual([
        '5,metadata,metadata is nested more than 32 levels deep,',
        '6,metadata,"metadata.matter_id is a whole number past 2^53, which is not carried exactly: write it as a string",',
      ]);

      // The same through enqueue_event: the number refused at once (the caller's transaction
      // learns it), the depth, which it does not check, refused when its turn comes, not sent.
      const db = await openDb({
        url: TEST_DATABASE_URL,
        schema,
        poolMax: 1,
        dataDir: TEST_DATABASE_URL ? undefined : join(dir, 'data'),
      });
      const enqueue = (key: string, metadata: string) =>
        db.knex.raw('select ??(?, ?, ?, ?::jsonb)', [
          `${schema}.enqueue_event`,
          'sql@example.com',
          'matter.closed',
          key,
          metadata,
        ]);
      try {
        await enqueue('sql-deep', `${'{"a":'.repeat(40)}1${'}'.repeat(40)}`);
        await expect(enqueue('sql-int', '{"matter_id": 9007199254740993}')).rejects.toThrow(
          'enqueue_event: metadata of key sql-int holds the number 9007199254740993 is a whole number past 2^53',
        );
      } finally {
        await db.close();
      }
      const flushed = await runCli(['events', 'flush'], env);
      expect(flushed.stdout).toContain('sent=1 retried=0 failed=1');
      const received = (await sandbox.control.truth(sandbox.companyId)).events;
      expect(received.filter((e) => e.metadata?.k === 'trimmed')).toHaveLength(1);
      expect(received.filter((e) => e.email === 'sql@example.com' || e.email === 'int@example.com')).toEqual(
        [],
      );
    });
  });
});
