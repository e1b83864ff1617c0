import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError, configSecrets, envSchema, parseConfig, requireApi } from '../../src/config/schema.js';
import { cliEnv, runCli } from '../helpers/cli.js';

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

  it('bounds every duration by what a timer can wait', () => {
    const durations = Object.keys(envSchema.shape).filter((name) => name.endsWith('_SECONDS'));
    expect(durations.length).toBeGreaterThan(10);
    for (const name of durations) {
      expect(() => parseConfig({ [name]: '2147484' }), name).toThrow(new RegExp(`${name} must be at most`));
    }
    expect(parseConfig({ JOB_LEASE_SECONDS: '2147483' }).jobs.leaseSeconds).toBe(2_147_483);
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
      expect(message).toMatch(/REVIEWS_API_KEY must not hold a control character/);
      expect(message).not.toContain('sk_live_abc');
    }
  });

  it('names the missing variable when a command needs the API', () => {
    expect(() => requireApi(parseConfig({}))).toThrow(/REVIEWS_API_URL/);
    expect(() => requireApi(parseConfig({ REVIEWS_API_URL: 'https://x.test' }))).toThrow(/REVIEWS_API_KEY/);
    expect(requireApi(parseConfig({ REVIEWS_API_URL: 'https://x.test/', REVIEWS_API_KEY: 'k' }))).toEqual({
      url: 'https://x.test',
      key: 'k',
    });
  });

  it('lists every secret for the log scrubber, including the database password', () => {
    const config = parseConfig({
      REVIEWS_API_KEY: 'key-123456',
      WEBHOOK_SECRETS: 'whsec_old, whsec_new',
      DATABASE_URL: 'postgres://u:p%40ss@db:5432/x',
    });
    expect(configSecrets(config).sort()).toEqual(['key-123456', 'p@ss', 'whsec_new', 'whsec_old']);
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
  ])('exits 2 with one line naming %s', async (variable, value) => {
    const result = await runCli(['status'], cliEnv({ [variable]: value, DATA_DIR: '/nonexistent' }));
    expect(result.code).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^review-mirror: invalid configuration: ${variable} `));
    expect(result.stderr).not.toContain('s3cret');
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
