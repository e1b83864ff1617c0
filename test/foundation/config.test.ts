import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getTasks } from 'node-cron';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import {
  ConfigError,
  configSecrets,
  envSchema,
  MAX_RETENTION_DAYS,
  parseConfig,
  requireApi,
} from '../../src/config/schema.js';
import { MIN_SECRET_LENGTH, SecretScrubber } from '../../src/log.js';
import { cliEnv, runCli } from '../helpers/cli.js';
import { freshDb } from '../helpers/db.js';

describe('parseConfig', () => {
  it('applies the documented defaults', () => {
    const config = parseConfig({});
    expect(config.db).toEqual({
      url: undefined,
      schema: 'review_mirror',
      poolMax: 10,
      statementTimeoutMs: 300_000,
      pooler: 'none',
    });
    expect(config.jobs.leaseSeconds).toBe(30);
    expect(config.dataDir).toBe('./data');
    expect(config.http.port).toBe(8080);
    expect(config.admin.port).toBe(9464);
    expect(config.logLevel).toBe('info');
    expect(config.sync.overlapMs).toBe(600_000);
    expect(config.webhook.toleranceSeconds).toBe(300);
    expect(config.webhook.maxBodyBytes).toBe(1024 * 1024);
    expect(Object.isFrozen(config.api)).toBe(true);
  });

  it.each([
    [{ HTTP_PORT: 'abc' }, 'HTTP_PORT'],
    [{ ADMIN_PORT: '70000' }, 'ADMIN_PORT'],
    [{ REVIEWS_API_URL: 'not-a-url' }, 'REVIEWS_API_URL'],
    [{ REVIEWS_API_URL: 'ftp://example.com' }, 'REVIEWS_API_URL'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ DB_SCHEMA: 'Robert"; drop' }, 'DB_SCHEMA'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ SYNC_REVIEWS_CRON: 'every minute' }, 'SYNC_REVIEWS_CRON'],
    [{ TLS_CERT_FILE: '/c.pem' }, 'TLS_KEY_FILE'],
    [{ DATABASE_URL: 'postgres://u:s3cretpw@host:notaport/db' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'postgres://u:s3cret%zzpw@host/db' }, 'DATABASE_URL'],
    [{ HTTP_PORT: '9000', ADMIN_PORT: '9000' }, 'HTTP_PORT and ADMIN_PORT'],
    [{ REVIEWS_API_URL: 'https://platform.example.com/api/v1/partner/' }, 'REVIEWS_API_URL'],
    // A route as well: every request would go to a path holding it twice, a 404 naming no setting.
    [
      { REVIEWS_API_URL: 'https://platform.example.com/API/v1/partner/reviews' },
      "REVIEWS_API_URL must be the platform's base URL, without /api/v1/partner or anything after it",
    ],
    // Requests are made of the origin and the path: a query or fragment would be dropped unsaid.
    [
      { REVIEWS_API_URL: 'https://platform.example.com/?tenant=acme' },
      'REVIEWS_API_URL must not hold a query (?…) or a fragment (#…)',
    ],
    [{ REVIEWS_API_URL: 'https://platform.example.com/#partner' }, 'REVIEWS_API_URL must not hold a query'],
    [{ DB_POOLER: 'session' }, 'DB_POOLER must be one of none, transaction'],
    [{ JOB_LEASE_SECONDS: '1' }, 'JOB_LEASE_SECONDS must be at least 3'],
    // Past what a timer or PostgreSQL accepts: a timer would fire after 1 ms, every connection fail.
    [{ DB_STATEMENT_TIMEOUT_SECONDS: '2147484' }, 'DB_STATEMENT_TIMEOUT_SECONDS must be at most 86400'],
    [{ SHUTDOWN_GRACE_SECONDS: '2147484' }, 'SHUTDOWN_GRACE_SECONDS must be at most 3600'],
    [{ JOB_LEASE_SECONDS: '2147484' }, 'JOB_LEASE_SECONDS must be at most 2147483'],
    [{ EVENTS_LEASE_SECONDS: '2147484' }, 'EVENTS_LEASE_SECONDS must be at most 2147483'],
    [
      { WEBHOOK_COMMIT_TIMEOUT_SECONDS: '10000000000' },
      'WEBHOOK_COMMIT_TIMEOUT_SECONDS must be at most 2147483',
    ],
    [{ API_REQUEST_TIMEOUT_SECONDS: '2147483.5' }, 'API_REQUEST_TIMEOUT_SECONDS must be at most 2147483'],
  ])('rejects %o naming %s in one line', (env, variable) => {
    expect(() => parseConfig(env)).toThrow(ConfigError);
    try {
      parseConfig(env);
    } catch (error) {
      const message = (error as Error).message;
      expect(message).toContain(variable);
      expect(message).not.toContain('\n');
    }
  });

  it('refuses credentials in REVIEWS_API_URL without repeating them', () => {
    for (const url of [
      'https://user:hunter2pw@platform.example.com',
      'https://hunter2pw@platform.example.com',
    ]) {
      expect(() => parseConfig({ REVIEWS_API_URL: url })).toThrow(
        /REVIEWS_API_URL must not hold a user name or password/,
      );
      expect(() => parseConfig({ REVIEWS_API_URL: url })).not.toThrow(/hunter2pw/);
    }
  });

  it('bounds every duration by what a timer can wait', () => {
    const durations = Object.keys(envSchema.shape).filter((name) => name.endsWith('_SECONDS'));
    expect(durations.length).toBeGreaterThan(10);
    for (const name of durations) {
      expect(() => parseConfig({ [name]: '2147484' }), name).toThrow(new RegExp(`${name} must be at most`));
    }
    expect(parseConfig({ JOB_LEASE_SECONDS: '2147483' }).jobs.leaseSeconds).toBe(2_147_483);
  });

  // Valid field by field to node-cron, which then finds no next run: the job would never run.
  it.each([
    ['SYNC_REVIEWS_CRON', '0 0 1-7 * 1#2'],
    ['SYNC_DIRECTORY_CRON', '0 0 L-30 2 *'],
    ['SYNC_RECONCILE_CRON', '0 9 1-7 * MON#3'],
    ['CRM_INBOX_CRON', '*/10 0 0 8-31 * 1#1'],
    ['WEBHOOK_HEALTH_CRON', '0 0 1-7 * 1#2'],
  ])('refuses %s=%s, a schedule that never runs, saying so', (variable, expression) => {
    expect(() => parseConfig({ [variable]: expression })).toThrow(
      new ConfigError(
        `invalid configuration: ${variable} ("${expression}") matches no time: its fields never hold at once, so the job would never run; correct it, or set "off" to not schedule the job`,
      ),
    );
  });

  it('takes schedules that run, however rarely, and "off"', () => {
    const config = parseConfig({
      SYNC_REVIEWS_CRON: '*/5 * * * *',
      SYNC_DIRECTORY_CRON: ' 0 0 29 2 * ',
      SYNC_RECONCILE_CRON: 'off',
      CRM_INBOX_CRON: '* * * * * *',
      WEBHOOK_HEALTH_CRON: '0 0 8-14 * 1#2',
    });
    expect(config.sync).toMatchObject({
      reviewsCron: '*/5 * * * *',
      directoryCron: '0 0 29 2 *',
      reconcileCron: 'off',
    });
    expect(config.contacts.inboxCron).toBe('* * * * * *');
    expect(config.webhook.healthCron).toBe('0 0 8-14 * 1#2');
    // The defaults run too.
    expect(() => parseConfig({})).not.toThrow();
  });

  it('leaves no task of its checks in node-cron', () => {
    const before = getTasks().size;
    parseConfig({ SYNC_REVIEWS_CRON: '*/5 * * * *' });
    expect(() => parseConfig({ SYNC_REVIEWS_CRON: '0 0 1-7 * 1#2' })).toThrow(ConfigError);
    expect(getTasks().size).toBe(before);
  });

  it('refuses an events lease shorter than twice the request timeout, naming both variables and values', () => {
    // A request is given half a lease at worst before its claim's deadline cuts it off.
    expect(() => parseConfig({ EVENTS_LEASE_SECONDS: '59' })).toThrow(
      new ConfigError(
        'invalid configuration: EVENTS_LEASE_SECONDS (59) must be at least twice API_REQUEST_TIMEOUT_SECONDS (30), so at least 60: ' +
          "an event's request is cut off a quarter of a lease before its claim runs out, so it may get only half a lease; " +
          'raise EVENTS_LEASE_SECONDS or lower API_REQUEST_TIMEOUT_SECONDS',
      ),
    );
    expect(() => parseConfig({ API_REQUEST_TIMEOUT_SECONDS: '45', EVENTS_LEASE_SECONDS: '60' })).toThrow(
      /EVENTS_LEASE_SECONDS \(60\) must be at least twice API_REQUEST_TIMEOUT_SECONDS \(45\)/,
    );
    // Left unset, the lease follows a raised timeout: a deployment that raised only the timeout
    // still starts.
    expect(parseConfig({ API_REQUEST_TIMEOUT_SECONDS: '45' }).events.leaseMs).toBe(90_000);
    expect(parseConfig({ API_REQUEST_TIMEOUT_SECONDS: '45.2' }).events.leaseMs).toBe(91_000);
    expect(parseConfig({ API_REQUEST_TIMEOUT_SECONDS: '10' }).events.leaseMs).toBe(60_000);
    expect(() => parseConfig({ EVENTS_LEASE_SECONDS: '5', API_REQUEST_TIMEOUT_SECONDS: '2.6' })).toThrow(
      /EVENTS_LEASE_SECONDS \(5\) .* API_REQUEST_TIMEOUT_SECONDS \(2\.6\)/,
    );
    // Exactly twice is enough (the defaults), as is a timeout of 0 (none: the claim bounds the request).
    expect(parseConfig({}).events.leaseMs).toBe(2 * parseConfig({}).api.requestTimeoutMs);
    expect(
      parseConfig({ EVENTS_LEASE_SECONDS: '5', API_REQUEST_TIMEOUT_SECONDS: '2.5' }).events.leaseMs,
    ).toBe(5_000);
    expect(parseConfig({ EVENTS_LEASE_SECONDS: '1', API_REQUEST_TIMEOUT_SECONDS: '0' }).events.leaseMs).toBe(
      1_000,
    );
    expect(
      parseConfig({ EVENTS_LEASE_SECONDS: '120', API_REQUEST_TIMEOUT_SECONDS: '60' }).api.requestTimeoutMs,
    ).toBe(60_000);
    // A bad value is reported as such, not as a breach of the relation.
    expect(() => parseConfig({ EVENTS_LEASE_SECONDS: 'soon' })).toThrow(
      /^invalid configuration: EVENTS_LEASE_SECONDS must be/,
    );
  });

  it('never LISTENs through a transaction pooler: only on DATABASE_LISTEN_URL, else the outbox is polled', () => {
    const pooler = 'postgres://app@pgbouncer:6432/reviews';
    const direct = 'postgres://app@db:5432/reviews';
    expect(parseConfig({ DATABASE_URL: direct }).events.listenUrl).toBe(direct);
    expect(parseConfig({ DATABASE_URL: pooler, DB_POOLER: 'transaction' }).events.listenUrl).toBeUndefined();
    expect(
      parseConfig({ DATABASE_URL: pooler, DB_POOLER: 'transaction', DATABASE_LISTEN_URL: direct }).events
        .listenUrl,
    ).toBe(direct);
  });

  it('never echoes a value in its error, since it may be a secret', () => {
    expect(() => parseConfig({ API_MAX_RETRIES: 'sk_live_abcdef' })).toThrow(/API_MAX_RETRIES/);
    try {
      parseConfig({ API_MAX_RETRIES: 'sk_live_abcdef' });
    } catch (error) {
      expect((error as Error).message).not.toContain('sk_live_abcdef');
    }
  });

  it('takes numbers written in decimal only, naming the variable of any other', () => {
    expect(
      parseConfig({ HTTP_PORT: ' 8081 ', API_MAX_RETRIES: '0', SYNC_OVERLAP_SECONDS: '1.5' }),
    ).toMatchObject({
      http: { port: 8081 },
      api: { maxRetries: 0 },
    });
    for (const [name, value] of [
      ['HTTP_PORT', '0x50'],
      ['DB_POOL_MAX', '1e9'],
      ['API_MAX_RETRIES', ' '],
      ['CRM_INBOX_SETTLE_SECONDS', 'ten'],
      ['API_PAGE_SIZE', '5O'],
    ]) {
      expect(() => parseConfig({ [name!]: value }), `${name}=${value}`).toThrow(
        new RegExp(`${name} must be a`),
      );
    }
    expect(() => parseConfig({ SYNC_OVERLAP_SECONDS: '-1' })).toThrow(/SYNC_OVERLAP_SECONDS must be >= 0/);
  });

  it('refuses an API key holding a control character, as a second line in its file, without showing it', () => {
    for (const key of ['sk_live_abc\nsecond', 'sk_live_abc\tdef', 'sk_live_abc\u0001']) {
      let message = '';
      try {
        parseConfig({ REVIEWS_API_KEY: key });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(
        /^invalid configuration: REVIEWS_API_KEY must not hold a control character such as a line break \(character 12 of \d+ is one; is REVIEWS_API_KEY_FILE more than one line\?\)$/,
      );
      expect(message).not.toContain('sk_live_abc');
    }
  });

  it('refuses an API key holding a character no HTTP header carries, naming its place, never the key', () => {
    // undici sends a header value of a tab, U+0020-U+007E and U+0080-U+00FF only (as Latin-1
    // bytes), and refuses any other before sending: every request failed, as a network error.
    for (const [key, which] of [
      ['sk_live_\u201cabcdef\u201d', 'character 9 of 16'],
      ['sk_live_abc\u200bdef', 'character 12 of 15'],
      ['sk_live_abcdef\u{1f511}', 'character 15 of 15'],
      ['sk_live_abc\u0100def', 'character 12 of 15'],
    ] as const) {
      let message = '';
      try {
        parseConfig({ REVIEWS_API_KEY: key });
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        message = (error as Error).message;
      }
      expect(message, JSON.stringify(key)).toBe(
        `invalid configuration: REVIEWS_API_KEY must hold only characters an HTTP header can carry (${which} is beyond Latin-1, such as a typographic quote or an invisible space pasted with the key): the key is sent in a header`,
      );
      expect(message).not.toContain('sk_live');
      expect(message).not.toContain('abc');
    }
    // The first bad character is named, whichever kind it is.
    expect(() => parseConfig({ REVIEWS_API_KEY: 'sk_live_\u2019abc\ndef' })).toThrow(
      /REVIEWS_API_KEY must hold only characters an HTTP header can carry \(character 9 of 16 /,
    );
    expect(() => parseConfig({ REVIEWS_API_KEY: 'sk_live_\u0000abc\u2019def' })).toThrow(
      /REVIEWS_API_KEY must not hold a control character such as a line break \(character 9 of 16 is one;/,
    );
    // Latin-1 is what undici sends: the edge, U+00FF, and the rest of it are taken as they are.
    for (const key of ['sk_live_abc\u00ffdef', 'sk_live_p\u00e4ss~!', 'sk_live\u00a0abc\u0080']) {
      expect(parseConfig({ REVIEWS_API_KEY: key }).api.key, JSON.stringify(key)).toBe(key);
    }
  });

  it('names the missing variable when a command needs the API', () => {
    expect(() => requireApi(parseConfig({}))).toThrow(/REVIEWS_API_URL/);
    expect(() => requireApi(parseConfig({ REVIEWS_API_URL: 'https://x.test' }))).toThrow(/REVIEWS_API_KEY/);
    expect(
      requireApi(parseConfig({ REVIEWS_API_URL: 'https://x.test/', REVIEWS_API_KEY: 'key-123456' })),
    ).toEqual({
      url: 'https://x.test',
      key: 'key-123456',
    });
  });

  it('lists every secret for the log scrubber, including the database password', () => {
    const config = parseConfig({
      REVIEWS_API_KEY: 'key-123456',
      WEBHOOK_SECRETS: 'whsec_old, whsec_new',
      DATABASE_URL: 'postgres://u:p%40ss@db:5432/x',
    });
    // The URL too, whole: it holds the password (see the short-password test below).
    expect(configSecrets(config).sort()).toEqual(
      ['key-123456', 'p%40ss', 'p@ss', 'postgres://u:p%40ss@db:5432/x', 'whsec_new', 'whsec_old'].sort(),
    );
  });

  it('lists a password given in the URL query, which pg takes over the one before the @, and sslpassword', () => {
    const url =
      'postgres://u@db:5432/x?sslmode=require&password=hunter22secret&sslpassword=k3y%26pass+phrase';
    const config = parseConfig({ DATABASE_URL: url });
    const secrets = configSecrets(config);
    expect(secrets).toEqual(
      expect.arrayContaining([url, 'hunter22secret', 'k3y&pass phrase', 'k3y%26pass+phrase']),
    );
    const scrubber = new SecretScrubber(secrets);
    const line = scrubber.scrub('conn: password=hunter22secret sslpassword=k3y&pass phrase');
    expect(line).not.toContain('hunter22');
    expect(line).not.toContain('k3y');
    // A LISTEN URL of its own, too.
    const listen = 'postgres://u@db:5432/x?password=listen-only-pw';
    expect(configSecrets(parseConfig({ DATABASE_LISTEN_URL: listen }))).toEqual(
      expect.arrayContaining([listen, 'listen-only-pw']),
    );
    // A URL with no secret in it lists nothing.
    expect(configSecrets(parseConfig({ DATABASE_URL: 'postgres://u@db:5432/x?sslmode=require' }))).toEqual(
      [],
    );
  });

  it('accepts a database password too short to scrub alone, and hides the URL that holds it whole', () => {
    // Refusing it would stop deployments that work today; the URL is what an error would echo.
    const url = 'postgres://u:pw1@db:5432/x';
    const config = parseConfig({ DATABASE_URL: url });
    expect(config.db.url).toBe(url);
    const scrubber = new SecretScrubber(configSecrets(config));
    expect(scrubber.scrub(`could not reach ${url}: refused`)).toBe('could not reach [REDACTED]: refused');
  });

  it('refuses an API key or webhook secret shorter than the log scrubber hides, saying why', () => {
    // The number the scrubber goes by: it hides a secret of this length, not one shorter.
    const exact = 'x'.repeat(MIN_SECRET_LENGTH);
    expect(new SecretScrubber([exact]).scrub(`a ${exact} b`)).toBe('a [REDACTED] b');
    const shorter = 'y'.repeat(MIN_SECRET_LENGTH - 1);
    expect(new SecretScrubber([shorter]).scrub(`a ${shorter} b`)).toBe(`a ${shorter} b`);

    expect(parseConfig({ REVIEWS_API_KEY: 'k-1234' }).api.key).toBe('k-1234');
    expect(() => parseConfig({ REVIEWS_API_KEY: 'k3y45' })).toThrow(
      new ConfigError(
        'invalid configuration: REVIEWS_API_KEY must be at least 6 characters long: a shorter value cannot be told from ordinary text, so it would not be hidden in logs',
      ),
    );
    expect(parseConfig({ WEBHOOK_SECRETS: 'whsec1' }).webhook.secrets).toEqual(['whsec1']);
    expect(() => parseConfig({ WEBHOOK_SECRETS: 'whsec_long_enough, whsec' })).toThrow(
      new ConfigError(
        'invalid configuration: WEBHOOK_SECRETS must hold secrets of at least 6 characters (secret 2 of 2 is shorter): a shorter value cannot be told from ordinary text, so it would not be hidden in logs',
      ),
    );
  });

  it('refuses an http:// WEBHOOK_PUBLIC_URL, which the platform refuses at registration, but for a loopback host', () => {
    for (const url of [
      'http://mirror.example.com/webhooks/review-created',
      'http://10.0.0.5:8080/hook',
      'HTTP://Example.com/',
    ]) {
      expect(() => parseConfig({ WEBHOOK_PUBLIC_URL: url }), url).toThrow(
        /^invalid configuration: WEBHOOK_PUBLIC_URL must be an https:\/\/ URL: the platform refuses HTTP webhook URLs at registration/,
      );
    }
    expect(() => parseConfig({ WEBHOOK_PUBLIC_URL: 'ftp://mirror.example.com/' })).toThrow(
      'invalid configuration: WEBHOOK_PUBLIC_URL must be a URL',
    );
    // A sandbox beside a receiver without TLS (the demo, the tests) is sent http:// loopback URLs.
    for (const url of [
      'https://mirror.example.com/webhooks/review-created',
      'http://127.0.0.1:8080/webhooks/review-created',
      'http://localhost:8080/hook',
      'http://[::1]:8080/hook',
    ]) {
      expect(parseConfig({ WEBHOOK_PUBLIC_URL: url }).webhook.publicUrl, url).toBe(url);
    }
    expect(parseConfig({ WEBHOOK_PUBLIC_URL: '' }).webhook.publicUrl).toBeUndefined();
  });

  it('takes WEBHOOK_SECRETS separated by commas or line breaks, and refuses a control character inside one', () => {
    expect(parseConfig({ WEBHOOK_SECRETS: 'whsec_old\nwhsec_new\n' }).webhook.secrets).toEqual([
      'whsec_old',
      'whsec_new',
    ]);
    expect(parseConfig({ WEBHOOK_SECRETS: 'whsec_a,\r\nwhsec_b\r\n\r\nwhsec_c, ' }).webhook.secrets).toEqual([
      'whsec_a',
      'whsec_b',
      'whsec_c',
    ]);
    for (const value of ['whsec_old,whsec\tnew', 'whsec_old\nwhsec\u0000new', 'whsec_old,whsec\u007fnew']) {
      let message = '';
      try {
        parseConfig({ WEBHOOK_SECRETS: value });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, JSON.stringify(value)).toMatch(
        /^invalid configuration: WEBHOOK_SECRETS must not hold a control character such as a tab inside a secret \(secret 2 of 2 does\): secrets are separated by commas or line breaks/,
      );
      expect(message).not.toContain('whsec');
      expect(message).not.toContain('\n');
    }
    // Set, but no secret in it: a mistake, not "none".
    expect(() => parseConfig({ WEBHOOK_SECRETS: ' ,\n, ' })).toThrow(
      /^invalid configuration: WEBHOOK_SECRETS must list at least one secret/,
    );
    expect(parseConfig({ WEBHOOK_SECRETS: '' }).webhook.secrets).toEqual([]);
  });

  it('bounds every retention in days by a century, so the prune cutoff stays a valid timestamp', () => {
    const retentions = Object.keys(envSchema.shape).filter((name) => name.endsWith('_DAYS'));
    expect(retentions.sort()).toEqual([
      'CONTACTS_LOG_RETENTION_DAYS',
      'EVENTS_KEY_RETENTION_DAYS',
      'EVENTS_RETENTION_DAYS',
      'SYNC_RUNS_RETENTION_DAYS',
    ]);
    for (const name of retentions) {
      for (const value of [String(MAX_RETENTION_DAYS + 1), '99999999']) {
        expect(() => parseConfig({ [name]: value }), `${name}=${value}`).toThrow(
          new ConfigError(
            `invalid configuration: ${name} must be at most 36500 (100 years; to keep rows for good, set that)`,
          ),
        );
      }
      expect(() => parseConfig({ [name]: '0' }), name).toThrow(new RegExp(`${name} must be > 0`));
      expect(() => parseConfig({ [name]: MAX_RETENTION_DAYS.toString() }), name).not.toThrow();
    }
    const config = parseConfig({
      SYNC_RUNS_RETENTION_DAYS: '36500',
      CONTACTS_LOG_RETENTION_DAYS: '36500',
      EVENTS_RETENTION_DAYS: '36500',
      EVENTS_KEY_RETENTION_DAYS: '36500',
    });
    expect([
      config.jobs.runRetentionDays,
      config.contacts.logRetentionDays,
      config.events.retentionDays,
      config.events.keyRetentionDays,
    ]).toEqual([36_500, 36_500, 36_500, 36_500]);
  });

  it('refuses a statement timeout that PostgreSQL would read as no limit, or that would cancel ordinary statements', () => {
    // pg sends statement_timeout truncated to whole milliseconds: 0.0001 s went as 0, no limit.
    for (const value of ['0.0001', '0.0009', '0.001', '0.5', '0.999', '-1']) {
      expect(() => parseConfig({ DB_STATEMENT_TIMEOUT_SECONDS: value }), value).toThrow(
        new ConfigError(
          'invalid configuration: DB_STATEMENT_TIMEOUT_SECONDS must be 0 (no limit) or at least 1: less than a millisecond reaches PostgreSQL as 0, no limit at all, and less than a second would cancel ordinary statements on a healthy database',
        ),
      );
    }
    // 0 keeps its documented meaning; the floor and the ceiling are taken.
    expect(parseConfig({ DB_STATEMENT_TIMEOUT_SECONDS: '0' }).db.statementTimeoutMs).toBe(0);
    expect(parseConfig({ DB_STATEMENT_TIMEOUT_SECONDS: '1' }).db.statementTimeoutMs).toBe(1_000);
    expect(parseConfig({ DB_STATEMENT_TIMEOUT_SECONDS: '1.5' }).db.statementTimeoutMs).toBe(1_500);
    expect(parseConfig({ DB_STATEMENT_TIMEOUT_SECONDS: '86400' }).db.statementTimeoutMs).toBe(86_400_000);
  });

  it('refuses a webhook commit timeout so short that a healthy database would miss it', () => {
    for (const value of ['0', '0.001', '0.5', '0.999']) {
      expect(() => parseConfig({ WEBHOOK_COMMIT_TIMEOUT_SECONDS: value }), value).toThrow(
        new ConfigError(
          'invalid configuration: WEBHOOK_COMMIT_TIMEOUT_SECONDS must be at least 1: a commit on a healthy database may take some hundreds of milliseconds, so less would answer deliveries 503 and mark the replica not ready',
        ),
      );
    }
    expect(parseConfig({ WEBHOOK_COMMIT_TIMEOUT_SECONDS: '1' }).webhook.commitTimeoutMs).toBe(1_000);
    expect(parseConfig({}).webhook.commitTimeoutMs).toBe(5_000);
  });

  it('refuses a platform timeout so short that every request could time out; 0 is none', () => {
    for (const value of ['0.0001', '0.5', '0.999', '-1']) {
      expect(() => parseConfig({ API_CONNECT_TIMEOUT_SECONDS: value }), value).toThrow(
        new ConfigError(
          'invalid configuration: API_CONNECT_TIMEOUT_SECONDS must be 0 (none) or at least 1: a connection to the platform takes two or three round trips, so less could time out every one',
        ),
      );
      expect(() => parseConfig({ API_REQUEST_TIMEOUT_SECONDS: value }), value).toThrow(
        new ConfigError(
          "invalid configuration: API_REQUEST_TIMEOUT_SECONDS must be 0 (none) or at least 1: a request takes round trips to the platform and the platform's own time, so less could time out every one",
        ),
      );
    }
    for (const [value, ms] of [
      ['0', 0],
      ['1', 1_000],
      ['2.5', 2_500],
    ] as const) {
      const { api } = parseConfig({ API_CONNECT_TIMEOUT_SECONDS: value, API_REQUEST_TIMEOUT_SECONDS: value });
      expect([api.connectTimeoutMs, api.requestTimeoutMs], value).toEqual([ms, ms]);
    }
  });

  it('refuses an outbox poll interval short enough to read it in a busy loop', () => {
    for (const value of ['0', '0.05', '-1']) {
      expect(() => parseConfig({ EVENTS_POLL_SECONDS: value }), value).toThrow(
        new ConfigError(
          'invalid configuration: EVENTS_POLL_SECONDS must be at least 0.1: the outbox is read again after this long, so less reads it in a busy loop',
        ),
      );
    }
    expect(parseConfig({ EVENTS_POLL_SECONDS: '0.1' }).events.pollMs).toBe(100);
    expect(parseConfig({}).events.pollMs).toBe(5_000);
  });
});

describe('the longest retention in SQL', () => {
  it('computes its prune cutoff on the database, where 99999999 days did not', async () => {
    const db = await freshDb({ migrate: false });
    try {
      const cutoff = 'select now() - make_interval(days => ?) as cutoff';
      const { rows } = (await db.knex.raw(cutoff, [MAX_RETENTION_DAYS])) as {
        rows: Array<{ cutoff: unknown }>;
      };
      expect(rows).toHaveLength(1);
      await expect(db.knex.raw(cutoff, [99_999_999])).rejects.toThrow(/out of range/);
    } finally {
      await db.close();
    }
  });
});

describe('loadConfig', () => {
  it('reads secrets from *_FILE variables and treats empty variables as unset', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rm-config-'));
    writeFileSync(join(dir, 'key'), 'file-key-value\n');
    const config = loadConfig({ REVIEWS_API_KEY_FILE: join(dir, 'key'), HTTP_PORT: '', ADMIN_PORT: '  ' });
    expect(config.api.key).toBe('file-key-value');
    // A value of blanks, left in an env file, is unset too: not port 0.
    expect(config.http.port).toBe(8080);
    expect(config.admin.port).toBe(9464);
  });

  it.each(['REVIEWS_API_KEY', 'WEBHOOK_SECRETS', 'DATABASE_URL', 'DATABASE_LISTEN_URL'])(
    'refuses an empty or blank %s_FILE, naming the variable and the file, instead of leaving it unset',
    (name) => {
      const dir = mkdtempSync(join(tmpdir(), 'rm-config-'));
      for (const [file, content] of [
        ['empty', ''],
        ['blank', ' \n\t\r\n'],
      ]) {
        const path = join(dir, file!);
        writeFileSync(path, content!);
        expect(() => loadConfig({ [`${name}_FILE`]: path })).toThrow(
          new ConfigError(
            `invalid configuration: ${name}_FILE names an empty file: ${path} (write ${name} in it, or unset ${name}_FILE)`,
          ),
        );
      }
    },
  );

  it('refuses a REVIEWS_API_KEY_FILE holding a character no HTTP header carries, never showing the key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rm-config-'));
    const path = join(dir, 'key');
    // A byte order mark is trimmed as a blank; a zero-width space is not.
    writeFileSync(path, '\ufeffsk_file_key\u200b\n');
    let message = '';
    try {
      loadConfig({ REVIEWS_API_KEY_FILE: path });
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      message = (error as Error).message;
    }
    expect(message).toMatch(
      /^invalid configuration: REVIEWS_API_KEY must hold only characters an HTTP header can carry \(character 12 of 12 is beyond Latin-1/,
    );
    expect(message).not.toContain('sk_file_key');
    writeFileSync(path, '\ufeffsk_file_key\n');
    expect(loadConfig({ REVIEWS_API_KEY_FILE: path }).api.key).toBe('sk_file_key');
  });

  it('reads a WEBHOOK_SECRETS_FILE of one secret per line as a list', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rm-config-'));
    writeFileSync(join(dir, 'secrets'), 'whsec_old_secret\nwhsec_new_secret\n');
    expect(loadConfig({ WEBHOOK_SECRETS_FILE: join(dir, 'secrets') }).webhook.secrets).toEqual([
      'whsec_old_secret',
      'whsec_new_secret',
    ]);
  });

  it('refuses a secret given both ways, and an unreadable secret file', () => {
    expect(() => loadConfig({ REVIEWS_API_KEY: 'a', REVIEWS_API_KEY_FILE: '/x' })).toThrow(/not both/);
    expect(() => loadConfig({ REVIEWS_API_KEY_FILE: '/nonexistent/key' })).toThrow(
      /REVIEWS_API_KEY_FILE cannot be read \(ENOENT/,
    );
  });
});

describe('DATABASE_URL forms pg accepts', () => {
  it.each([
    'postgres:///reviews?host=/var/run/postgresql',
    'postgres://mirror:s3cret@/reviews?host=/tmp',
    'postgres://mirror:p%40ss@[::1]:5432/reviews',
  ])('accepts %s, and scrubs its password', (url) => {
    const config = parseConfig({ DATABASE_URL: url });
    expect(config.db.url).toBe(url);
    const password = decodeURIComponent(url.match(/:([^:@/]*)@/)?.[1] ?? '');
    if (password !== '') expect(configSecrets(config)).toContain(password);
  });
});

describe('the CLI on bad configuration', () => {
  it.each([
    ['HTTP_PORT', 'abc'],
    ['REVIEWS_API_URL', 'not-a-url'],
    ['DATABASE_URL', 'postgres://u:s3cretpw@host:notaport/db'],
    ['DATABASE_URL', 'postgres://u:s3cret%zzpw@127.0.0.1/db'],
    ['REVIEWS_API_URL', 'https://platform.example.com/api/v1/partner'],
    ['REVIEWS_API_KEY', 's3cret_\u201ckey\u201d'],
    ['DB_STATEMENT_TIMEOUT_SECONDS', '0.0001'],
    ['WEBHOOK_COMMIT_TIMEOUT_SECONDS', '0.001'],
  ])('exits 2 with one line naming %s', async (variable, value) => {
    const result = await runCli(['status'], cliEnv({ [variable]: value, DATA_DIR: '/nonexistent' }));
    expect(result.code).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^review-mirror: invalid configuration: ${variable} `));
    expect(result.stderr).not.toContain('s3cret');
    expect(result.stdout).toBe('');
  });

  it('exits 2 with one line when DATABASE_URL_FILE names an empty file, not running on the embedded database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rm-config-'));
    const empty = join(dir, 'database_url');
    writeFileSync(empty, '\n');
    const result = await runCli(
      ['status'],
      cliEnv({ DATABASE_URL_FILE: empty, DATA_DIR: join(dir, 'data') }),
    );
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([
      `review-mirror: invalid configuration: DATABASE_URL_FILE names an empty file: ${empty} (write DATABASE_URL in it, or unset DATABASE_URL_FILE)`,
    ]);
    expect(result.stdout).toBe('');
  });

  it('exits 2 naming both ports when HTTP_PORT equals ADMIN_PORT, and starts nothing', async () => {
    const result = await runCli(
      ['run'],
      cliEnv({ HTTP_PORT: '18080', ADMIN_PORT: '18080', DATA_DIR: '/nonexistent' }),
    );
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([
      'review-mirror: invalid configuration: HTTP_PORT and ADMIN_PORT must differ (both are 18080); the admin port must never be public',
    ]);
    expect(result.stdout).toBe('');
  });
});
