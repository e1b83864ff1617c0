import { describe, expect, it } from 'vitest';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { ensureRegistration } from '../../src/webhooks/ensure.js';
import { checkWebhookHealth } from '../../src/webhooks/health.js';
import { SigningSecrets } from '../../src/webhooks/secrets.js';
import { saveRegistration } from '../../src/webhooks/webhooksSql.js';
import { cliEnv, runCli } from '../helpers/cli.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { fakePlatformFixture } from '../pull/helpers.js';

const URL = 'https://mirror.example.com/webhooks/review-created';
const STORED = 'whsec_stored_echoed_4f1c';
const CONFIGURED = 'whsec_configured_echoed_9b2e';
const KEY = 'rm_test_key_123456';

/** The built CLI's environment: the fake platform at `platformUrl`, `schema` on the local server. */
const cliEnvOn = (platformUrl: string, schema: string) =>
  cliEnv({
    DATABASE_URL: POSTGRES_URL,
    DB_SCHEMA: schema,
    REVIEWS_API_URL: platformUrl,
    REVIEWS_API_KEY: KEY,
    WEBHOOK_SECRETS: CONFIGURED,
    LOG_LEVEL: 'trace',
  });

/**
 * A platform may quote a delivery's signing secret in the `last_error` of its list: the text is
 * stored, logged and printed by `webhooks list` and `status`, and must hold no secret, whether
 * stored by a registration or configured in WEBHOOK_SECRETS.
 */
describe('a webhook list whose last_error echoes a signing secret', () => {
  const fx = fakePlatformFixture(({ path }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    const webhook = (id: string, secret: string) => ({
      id,
      url: URL,
      events: ['review.created'],
      last_error: `delivery failed: signature with ${secret} refused`,
      description: `label ${secret}`,
    });
    return { status: 200, body: [webhook('wh_1', STORED), webhook('wh_2', CONFIGURED)] };
  });
  const saveOurs = (db: typeof fx.db) =>
    saveRegistration(db.knex, db, { id: 'wh_1', url: URL, signing_secret: STORED });
  const expected = [
    { id: 'wh_1', last_error: 'delivery failed: signature with [REDACTED] refused' },
    { id: 'wh_2', last_error: 'delivery failed: signature with [REDACTED] refused' },
  ];

  it('is recorded by the health poll without the secrets', async () => {
    await saveOurs(fx.db);
    const secrets = new SigningSecrets([CONFIGURED], new SecretScrubber());
    const { listed } = await checkWebhookHealth({ api: fx.api, db: fx.db, secrets, log: quietLog });
    expect(listed).toMatchObject(expected);
    expect(listed.map((w) => w.description)).toEqual(['label [REDACTED]', 'label [REDACTED]']);
    const rows = await fx.db.knex(fx.db.table('webhooks')).orderBy('id').select('id', 'last_error');
    expect(rows).toEqual(expected);
  });

  // The built CLI (`npm run build`) on a schema of its own on the local server: a child process
  // cannot share the test's in-memory embedded database.
  it('is printed and stored by `webhooks list` without the secrets', async () => {
    const db = await freshDb({ url: POSTGRES_URL });
    try {
      await saveOurs(db);
      const env = cliEnvOn(fx.platform.url, db.schema);
      for (const args of [['webhooks', 'list'], ['webhooks', 'list', '--json'], ['status']]) {
        const result = await runCli(args, env);
        expect(result.code, result.stderr).toBe(0);
        expect(result.stdout).toContain('delivery failed: signature with [REDACTED] refused');
        for (const secret of [STORED, CONFIGURED]) {
          expect(result.stdout + result.stderr).not.toContain(secret);
        }
      }
      expect(await db.knex(db.table('webhooks')).orderBy('id').select('id', 'last_error')).toEqual(expected);
    } finally {
      await db.close();
    }
  });
});

const REGISTERED = 'whsec_just_registered_71d0';

/**
 * A platform may echo secrets in the informational texts of a registration's own answer: the
 * secret it has just made, another one, the API key. The answer's `signing_secret` is stored as
 * it is; its `description` and `last_error` are stored (and its fields printed) with none of them.
 */
describe('a registration answer whose description echoes a signing secret', () => {
  const echo = `secrets ${REGISTERED} ${STORED} ${CONFIGURED} key ${KEY}`;
  const fx = fakePlatformFixture(({ method, path }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') return { status: 200, body: [] };
    if (method === 'DELETE') return { status: 200, body: {} };
    const answer = {
      id: 'wh_new',
      url: URL,
      events: ['review.created'],
      signing_secret: REGISTERED,
      description: `review-mirror: ${echo}`,
      last_error: `not yet delivered (${echo})`,
    };
    return { status: 201, body: { webhook: answer } };
  });
  const saveOld = (db: typeof fx.db) =>
    saveRegistration(db.knex, db, { id: 'wh_old', url: 'https://old.example/hook', signing_secret: STORED });
  const registered = (db: typeof fx.db) =>
    db
      .knex(db.table('webhooks'))
      .where({ id: 'wh_new' })
      .first('signing_secret', 'description', 'last_error');
  const expected = {
    signing_secret: REGISTERED,
    description: 'review-mirror: secrets [REDACTED] [REDACTED] [REDACTED] key [REDACTED]',
    last_error: 'not yet delivered (secrets [REDACTED] [REDACTED] [REDACTED] key [REDACTED])',
  };
  const expectNoSecret = (text: string) => {
    for (const secret of [REGISTERED, STORED, CONFIGURED, KEY]) expect(text).not.toContain(secret);
  };

  it("is stored by the daemon's ensure with its secret, and without secrets in its texts", async () => {
    await saveOld(fx.db);
    const logged: string[] = [];
    const destination = { write: (line: string) => logged.push(line) } as unknown as NodeJS.WritableStream;
    const scrubber = new SecretScrubber();
    const log = makeLogger({ level: 'trace', scrubber, destination });
    const secrets = new SigningSecrets([CONFIGURED], scrubber);
    const deps = { api: fx.api, db: fx.db, secrets, log, haveConfiguredSecrets: false };
    expect(await ensureRegistration(deps, URL)).toMatchObject({ register: true });
    expect(await registered(fx.db)).toEqual(expected);
    expect(secrets.current()).toContain(REGISTERED);
    expectNoSecret(logged.join(''));
  });

  it('is stored and printed by `webhooks register` without secrets in its texts', async () => {
    const db = await freshDb({ url: POSTGRES_URL });
    try {
      await saveOld(db);
      const env = cliEnvOn(fx.platform.url, db.schema);
      const result = await runCli(['webhooks', 'register', '--url', URL, '--description', 'label'], env);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain('registered webhook wh_new');
      expectNoSecret(result.stdout + result.stderr);
      expect(await registered(db)).toEqual(expected);
    } finally {
      await db.close();
    }
  });
});
