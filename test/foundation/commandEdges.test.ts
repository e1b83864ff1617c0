import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Command } from 'commander';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { demoCommand } from '../../src/commands/demo.js';
import { eventsCommand } from '../../src/commands/events.js';
import { sandboxCommand } from '../../src/commands/sandbox.js';
import { splitPassword } from '../../src/commands/sql.js';
import { stateCommand } from '../../src/commands/state.js';
import { statusCommand } from '../../src/commands/status.js';
import { syncCommand } from '../../src/commands/sync.js';
import { webhooksCommand } from '../../src/commands/webhooks.js';
import { loadConfig } from '../../src/config/load.js';
import { configSecrets } from '../../src/config/schema.js';
import { openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { describeError } from '../../src/errors.js';
import { SecretScrubber } from '../../src/log.js';
import { SandboxControl } from '../../src/sandbox/controlClient.js';
import { saveRegistration } from '../../src/webhooks/webhooksSql.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { seededDataDir } from '../helpers/embeddedTemplate.js';
import { type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';

/**
 * A sandbox and a mirror of their own (a schema, or an embedded data directory) for commands run
 * in-process; `environment` points the commands at them and returns what they print.
 */
function commandFixture() {
  const fx = {
    sandbox: undefined as unknown as TestSandbox,
    dataDir: '',
    schema: uniqueSchema('edges'),
    environment: (extra: Record<string, string> = {}): string[] => {
      vi.stubEnv('DATABASE_URL', TEST_DATABASE_URL ?? '');
      vi.stubEnv('DATA_DIR', fx.dataDir);
      vi.stubEnv('DB_SCHEMA', fx.schema);
      vi.stubEnv('REVIEWS_API_URL', fx.sandbox.url);
      vi.stubEnv('REVIEWS_API_KEY', fx.sandbox.apiKey);
      vi.stubEnv('LOG_LEVEL', 'silent');
      for (const [name, value] of Object.entries(extra)) vi.stubEnv(name, value);
      const written: string[] = [];
      vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => written.push(String(chunk)) > 0);
      return written;
    },
  };
  beforeAll(async () => {
    fx.sandbox = await testSandbox();
    fx.dataDir = await mkdtemp(join(tmpdir(), 'rm-edges-'));
    if (!TEST_DATABASE_URL) await seededDataDir(fx.dataDir);
  });
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await fx.sandbox?.close();
    await dropSchema(fx.schema);
    await rm(fx.dataDir, { recursive: true, force: true });
  });
  return fx;
}

/** The operator commands at their edges: each test names what went wrong before. */

describe('sql: the password stays out of psql argv', () => {
  // pg (WHATWG URL) takes the last `@` before the path as the end of the credentials, so a raw `@`
  // in the password is a working DATABASE_URL; what reaches psql's argv is readable by `ps`.
  it('takes out a password that holds a raw @ whole, leaving no part of it in the URL', () => {
    const written = 'postgres://mirror:p@ss@db.example:5432/reviews';
    expect(new URL(written).password).toBe('p%40ss');
    const { url, password } = splitPassword(written);
    expect(password).toBe('p@ss');
    expect(url).toBe('postgres://mirror@db.example:5432/reviews');
  });

  it('takes out the password of a user name that holds a raw @', () => {
    const written = 'postgres://bi@corp:s3cretpw@db.example/reviews';
    expect(new URL(written).password).toBe('s3cretpw');
    const { url, password } = splitPassword(written);
    expect(password).toBe('s3cretpw');
    expect(url).not.toContain('s3cretpw');
  });
});

describe('state set', () => {
  const fx = commandFixture();

  it('refuses a watermark in the future, after which every sync would read nothing new', async () => {
    fx.environment();
    const file = join(fx.dataDir, 'state.json');
    // A typo of the year: 2926 for 2026.
    await writeFile(file, JSON.stringify({ watermark: '2926-11-01T00:00:00.000Z' }));
    const set = await stateCommand()
      .parseAsync(['set', '--job', 'reviews', file], { from: 'user' })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    const [review] = await fx.sandbox.control.submitReviews(fx.sandbox.companyId, [
      { comment: 'after the set' },
    ]);
    await syncCommand().parseAsync(['reviews'], { from: 'user' });
    const db = await openDb({ url: TEST_DATABASE_URL, schema: fx.schema, poolMax: 1, dataDir: fx.dataDir });
    try {
      const mirrored = await db.knex(db.table('reviews')).where({ id: review!.id }).first();
      expect(describeError(set)).toMatch(
        /watermark 2926-11-01T00:00:00.000Z is in the future; nothing changed/,
      );
      expect(mirrored).toBeDefined();
    } finally {
      await db.close();
    }
  });
});

describe('webhooks commands whose failure echoes a stored signing secret', () => {
  const STORED = 'whsec_stored_in_db_echo_8c3a';
  const KEY = 'rm_test_key_123456';
  const schema = uniqueSchema('edges');
  let platform: FakePlatform;
  let dataDir: string;

  beforeAll(async () => {
    // A platform quoting what it holds of a webhook in its refusals (FIELD-NOTES 20).
    platform = await startFakePlatform(({ path }) =>
      path === '/webhook'
        ? { status: 400, body: { error: `cannot serve webhook wh_1 (signing_secret ${STORED})` } }
        : { status: 404, body: { error: 'not found' } },
    );
    dataDir = await mkdtemp(join(tmpdir(), 'rm-edges-'));
    if (!TEST_DATABASE_URL) await seededDataDir(dataDir);
    const db = await openDb({ url: TEST_DATABASE_URL, schema, poolMax: 1, dataDir });
    try {
      await migrate(db);
      await saveRegistration(db.knex, db, {
        id: 'wh_1',
        url: 'https://mirror.example.com/webhooks/review-created',
        signing_secret: STORED,
      });
    } finally {
      await db.close();
    }
  });
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await platform?.close();
    await dropSchema(schema);
    await rm(dataDir, { recursive: true, force: true });
  });

  for (const args of [
    ['list'],
    ['delete', 'wh_1'],
    ['register', '--url', 'https://mirror.example.com/webhooks/review-created'],
  ]) {
    it(`\`webhooks ${args.join(' ')}\` fails without printing the stored secret`, async () => {
      vi.stubEnv('DATABASE_URL', TEST_DATABASE_URL ?? '');
      vi.stubEnv('DATA_DIR', dataDir);
      vi.stubEnv('DB_SCHEMA', schema);
      vi.stubEnv('REVIEWS_API_URL', platform.url);
      vi.stubEnv('REVIEWS_API_KEY', KEY);
      vi.stubEnv('API_MAX_RETRIES', '0');
      vi.stubEnv('LOG_LEVEL', 'silent');
      const written: string[] = [];
      vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => written.push(String(chunk)) > 0);
      const error = await webhooksCommand()
        .parseAsync(args, { from: 'user' })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error).toBeInstanceOf(Error);
      // The line src/cli.ts prints for it.
      const line = new SecretScrubber(configSecrets(loadConfig(process.env))).scrub(describeError(error));
      expect(line).toContain('cannot serve webhook wh_1');
      expect(line + written.join('')).not.toContain(STORED);
    });
  }
});

describe('demo --keep-running', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  // Its comment: "Kept running, it stops on the first SIGINT or SIGTERM, even one sent while it
  // starts." The first Ctrl-C is taken from Node's default (which would kill it) and then only
  // read once every step has ended: a platform that does not answer keeps it going for minutes.
  it('ends soon after a Ctrl-C sent while it waits for the first sync', { timeout: 300_000 }, async () => {
    const dataDir = join(await mkdtemp(join(tmpdir(), 'rm-demo-signal-')), 'demo');
    const written: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => written.push(String(chunk)) > 0);
    let settled = false;
    const demo = demoCommand()
      .parseAsync(
        [
          '--keep-running',
          '--reviews',
          '20000',
          '--live',
          '0',
          '--data-dir',
          dataDir,
          '--log-level',
          'silent',
        ],
        { from: 'user' },
      )
      .then(
        () => undefined,
        (error: unknown) => error,
      )
      .finally(() => {
        settled = true;
      });
    try {
      const deadline = Date.now() + 60_000;
      let platform: string | undefined;
      while (platform === undefined && !settled && Date.now() < deadline) {
        platform = /sandbox platform\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(written.join(''))?.[1];
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(platform, written.join('')).toBeDefined();
      // The platform stops answering, then the operator presses Ctrl-C.
      await new SandboxControl(platform!).setFaults({ partner: { hang: 1 } });
      const interruptedAt = Date.now();
      process.emit('SIGINT', 'SIGINT');
      await demo;
      expect(Date.now() - interruptedAt).toBeLessThan(20_000);
    } finally {
      await demo;
      await rm(dirname(dataDir), { recursive: true, force: true });
    }
  });
});

describe('sandbox flags', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** What `sandbox ARGS` ends with: its refusal, or undefined once started (then stopped at once). */
  async function sandboxWith(args: string[]): Promise<unknown> {
    const written: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => written.push(String(chunk)) > 0);
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    let settled = false;
    const run = sandboxCommand()
      .exitOverride()
      .parseAsync([...args, '--port', '0'], { from: 'user' })
      .then(
        () => undefined,
        (error: unknown) => error,
      )
      .finally(() => {
        settled = true;
      });
    const deadline = Date.now() + 10_000;
    while (!settled && !written.join('').includes('control:') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    if (!settled) process.emit('SIGINT', 'SIGINT');
    return run;
  }

  // A key that no request can carry (an empty header reads as none; a header value loses its
  // surrounding spaces) is accepted, printed as the key to use, and then refused on every request.
  for (const key of ['', ' padded-key ']) {
    it(`refuses --api-key ${JSON.stringify(key)}, a key no request can present`, async () => {
      expect(await sandboxWith(['--api-key', key])).toMatchObject({ code: 'commander.invalidArgument' });
    });
  }

  // Past 2^31 - 1 ms a Node timer fires after 1 ms (TimeoutOverflowWarning): a generous delivery
  // timeout makes every delivery fail at once as a timeout, a slow time scale retries at once.
  for (const args of [
    ['--delivery-timeout-ms', '3000000000'],
    ['--time-scale', '2000'],
  ]) {
    it(`refuses ${args.join(' ')}, a wait no timer can hold`, async () => {
      expect(await sandboxWith(args)).toMatchObject({ code: 'commander.invalidArgument' });
    });
  }
});

describe('events flush', () => {
  const fx = commandFixture();
  afterEach(() => {
    process.exitCode = undefined;
  });

  // "send every event that is due now, then exit": one stopped by Ctrl-C or SIGTERM with events
  // still due must not end as one that did, with 0, or a script goes on as if they were sent.
  it('does not exit 0 when a signal stopped it with events still due', async () => {
    const written = fx.environment({ EVENTS_CONCURRENCY: '1' });
    for (let i = 0; i < 6; i++) {
      await eventsCommand().parseAsync(['send', '--email', `p${i}@example.com`, '--type', 'matter.closed'], {
        from: 'user',
      });
    }
    await fx.sandbox.control.setFaults({
      partner: { delay: 1, delayMs: 500, routes: ['/api/v1/partner/events'] },
    });
    process.exitCode = undefined;
    const flush = eventsCommand()
      .parseAsync(['flush'], { from: 'user' })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    await new Promise((resolve) => setTimeout(resolve, 300));
    process.emit('SIGINT', 'SIGINT');
    const failure = await flush;
    await fx.sandbox.control.setFaults({});
    const printed = written.join('');
    expect(printed).not.toMatch(/backlog=0\b/);
    expect(failure !== undefined || (process.exitCode ?? 0) !== 0).toBe(true);
  });
});

describe('commands that read the mirror, on the embedded database', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });

  // A mistyped DATA_DIR: `status`, a read, created a new embedded database there (tens of MB) and
  // reported it as a mirror whose migrations are pending and whose jobs never ran, exit 0, where
  // `sql` says there is no database; so did the other commands that read what runs stored.
  const commands: Array<[string, () => Command, string[]]> = [
    ['status', statusCommand, []],
    ['state get', stateCommand, ['get', '--job', 'reviews']],
    ['events list', eventsCommand, ['list']],
    ['events retry', eventsCommand, ['retry', 'some-key']],
    ['webhooks replay', webhooksCommand, ['replay']],
  ];
  for (const [name, command, args] of commands) {
    it(`\`${name}\` says there is no database in a DATA_DIR that holds none, creating nothing`, async () => {
      const parent = await mkdtemp(join(tmpdir(), 'rm-edges-'));
      const dataDir = join(parent, 'mistyped');
      try {
        vi.stubEnv('DATABASE_URL', '');
        vi.stubEnv('DATA_DIR', dataDir);
        vi.stubEnv('LOG_LEVEL', 'silent');
        vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
        const failure = await command()
          .parseAsync(args, { from: 'user' })
          .then(
            () => undefined,
            (error: unknown) => error,
          );
        expect(existsSync(join(dataDir, 'pgdata'))).toBe(false);
        expect(describeError(failure)).toMatch(/no embedded database/);
      } finally {
        await rm(parent, { recursive: true, force: true });
      }
    });
  }
});
