import { describe, expect, it } from 'vitest';
import { SecretScrubber } from '../../src/log.js';
import { ApiRequestError, ApiSchemaError } from '../../src/partner-api/errors.js';
import { ensureRegistration } from '../../src/webhooks/ensure.js';
import { checkWebhookHealth } from '../../src/webhooks/health.js';
import { SigningSecrets } from '../../src/webhooks/secrets.js';
import { saveRegistration } from '../../src/webhooks/webhooksSql.js';
import { cliEnv, runCli } from '../helpers/cli.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { fakePlatformFixture } from '../pull/helpers.js';

const URL = 'https://mirror.example.com/webhooks/review-created';
const SECRET = 'whsec_delete_answers_test_1';

const failure = (run: Promise<unknown>) =>
  run.then(
    () => undefined,
    (e: unknown) => e,
  );

/**
 * Spec 4.6 shows neither the body nor the status of a delete. A 2xx answer that says the delete
 * failed must not pass for done: the webhook would be marked deleted and its secret refused while
 * the platform still delivers with it.
 */
describe('a webhook delete answered 2xx with an error', () => {
  const hook = (id: string, created_at: string) => ({ id, url: URL, events: ['review.created'], created_at });
  let deleteAnswer: { status: number; body: unknown } = { status: 200, body: {} };
  const deleted: string[] = [];

  const fx = fakePlatformFixture(({ method, path, query }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') {
      return {
        status: 200,
        body: { webhooks: [hook('wh_1', '2026-01-01T00:00:00Z'), hook('wh_2', '2026-01-02T00:00:00Z')] },
      };
    }
    if (method === 'DELETE') {
      deleted.push(query.get('id') ?? '');
      return deleteAnswer;
    }
    return { status: 422, body: { error: 'not expected' } };
  });
  const deletedAt = async (id: string) =>
    (await fx.db.knex(fx.db.table('webhooks')).where({ id }).first())?.deleted_at;

  it('fails with the platform text on `success: false` or an `error`, whatever the 2xx status', async () => {
    deleteAnswer = { status: 200, body: { success: false, error: 'webhook could not be deleted' } };
    const error = await failure(fx.api.webhooks.delete('wh_1'));
    expect(error).toBeInstanceOf(ApiRequestError);
    expect((error as ApiRequestError).status).toBe(200);
    expect((error as Error).message).toBe(
      'DELETE /webhook?id=:id answered 200: webhook could not be deleted',
    );

    deleteAnswer = { status: 202, body: { error: { code: 'locked' } } };
    expect((await failure(fx.api.webhooks.delete('wh_1'))) as Error).toMatchObject({
      message: 'DELETE /webhook?id=:id answered 202: {"code":"locked"}',
    });
    deleteAnswer = { status: 200, body: { success: false } };
    expect((await failure(fx.api.webhooks.delete('wh_1'))) as Error).toMatchObject({
      message: 'DELETE /webhook?id=:id answered 200: {"success":false}',
    });
  });

  it('takes any other 2xx answer for done, an empty error beside it included', async () => {
    for (const body of ['', 'OK', { deleted: true }, { success: true, error: null }, { error: '' }, []]) {
      deleteAnswer = { status: body === '' ? 204 : 200, body };
      await expect(fx.api.webhooks.delete('wh_1')).resolves.toBeUndefined();
    }
  });

  it('leaves a duplicate undeleted, its secret accepted, when `run` could not delete it', async () => {
    // wh_2's secret is ours: wh_1 is the duplicate to remove.
    await saveRegistration(fx.db.knex, fx.db, {
      ...hook('wh_2', '2026-01-02T00:00:00Z'),
      signing_secret: SECRET,
    });
    await saveRegistration(fx.db.knex, fx.db, {
      ...hook('wh_1', '2026-01-01T00:00:00Z'),
      signing_secret: `${SECRET}_old`,
    });
    deleteAnswer = { status: 200, body: { success: false, error: 'webhook could not be deleted' } };
    deleted.length = 0;
    const secrets = new SigningSecrets([], new SecretScrubber());
    // Not a failure: the health check after it must go on (see undeletableDuplicate.test.ts).
    expect(
      await ensureRegistration(
        { api: fx.api, db: fx.db, secrets, log: quietLog, haveConfiguredSecrets: false },
        URL,
      ),
    ).toEqual({ keep: 'wh_2', register: false, remove: ['wh_1'], undeleted: ['wh_1'] });
    expect(deleted).toEqual(['wh_1']);
    expect(await deletedAt('wh_1')).toBeNull();
    expect((await secrets.refresh(fx.db)).toSorted()).toEqual([SECRET, `${SECRET}_old`]);
  });

  // The built CLI (`npm run build`), as an operator runs it, on a schema of its own on the local
  // server: a child process cannot share the test's in-memory embedded database.
  it('`webhooks delete` fails saying why, and keeps the webhook and its secret', async () => {
    const db = await freshDb({ url: POSTGRES_URL });
    try {
      await saveRegistration(db.knex, db, {
        ...hook('wh_1', '2026-01-01T00:00:00Z'),
        signing_secret: SECRET,
      });
      const deletedAtHere = async () =>
        ((await db.knex(db.table('webhooks')).where({ id: 'wh_1' }).first()) as { deleted_at: Date | null })
          .deleted_at;
      deleteAnswer = { status: 200, body: { success: false, error: 'webhook could not be deleted' } };
      const env = cliEnv({
        DATABASE_URL: POSTGRES_URL,
        DB_SCHEMA: db.schema,
        REVIEWS_API_URL: fx.platform.url,
        REVIEWS_API_KEY: 'rm_test_key_123456',
      });
      const result = await runCli(['webhooks', 'delete', 'wh_1'], env);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toContain('DELETE /webhook?id=:id answered 200: webhook could not be deleted');
      expect(await deletedAtHere()).toBeNull();

      deleteAnswer = { status: 200, body: { success: true } };
      const done = await runCli(['webhooks', 'delete', 'wh_1'], env);
      expect(done.stdout).toBe('deleted webhook wh_1\n');
      expect(await deletedAtHere()).not.toBeNull();
    } finally {
      await db.close();
    }
  });
});

/**
 * The list's shape is not shown by the spec (4.6). Answers that can only mean "no webhooks" must
 * let `run` register one; an object that may hold the list under another key must not.
 */
describe('a webhook list answered with nothing', () => {
  let listAnswer: unknown = '';
  let registered = 0;
  const fx = fakePlatformFixture(({ method, path }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') return { status: 200, body: listAnswer };
    registered++;
    const webhook = { id: `wh_${registered}`, url: URL, signing_secret: `${SECRET}_${registered}` };
    return { status: 201, body: { webhook } };
  });
  const secrets = new SigningSecrets([], new SecretScrubber());
  const ensure = () =>
    ensureRegistration({ api: fx.api, db: fx.db, secrets, log: quietLog, haveConfiguredSecrets: false }, URL);

  it('takes an empty body, `null`, `{}` and `{"webhooks": null}` for none, and registers', async () => {
    for (const answer of ['', 'null', {}, { webhooks: null }]) {
      listAnswer = answer;
      expect(await fx.api.webhooks.list()).toEqual([]);
      expect(await ensure()).toMatchObject({ register: true });
    }
    expect(registered).toBe(4);
    expect(secrets.current()).toHaveLength(4);
  });

  it('still refuses an object without `webhooks` that holds anything', async () => {
    listAnswer = { data: [{ id: 'wh_9', url: URL }] };
    expect(await failure(fx.api.webhooks.list())).toBeInstanceOf(ApiSchemaError);
  });
});

/**
 * One webhook of another shape must not fail the list the health poll and `run` read every tick;
 * a list that is still invalid names the entry and field at fault, not a shape it was tried as.
 */
describe('a webhook list with one entry of another shape among many', () => {
  const hooks = (n: number) =>
    Array.from(
      { length: n },
      (_, i): Record<string, unknown> => ({
        id: `wh_${i}`,
        url: `https://m${i}.example.com/x`,
        events: ['review.created'],
        is_active: true,
      }),
    );
  let listAnswer: unknown = [];
  const fx = fakePlatformFixture(({ path }) =>
    path === '/webhook' ? { status: 200, body: listAnswer } : { status: 404, body: { error: 'not found' } },
  );
  const health = () =>
    checkWebhookHealth({
      api: fx.api,
      db: fx.db,
      secrets: new SigningSecrets([], new SecretScrubber()),
      log: quietLog,
    });
  const storedCount = async () => Number((await fx.db.knex(fx.db.table('webhooks')).count({ n: '*' }))[0]?.n);

  it('records the list whose informational fields are of another type', async () => {
    const list = hooks(30);
    list[17]!.events = null;
    list[18]!.events = 'review.created';
    list[19]!.url = null;
    delete list[20]!.url;
    listAnswer = { webhooks: list };
    expect((await health()).listed).toHaveLength(30);
    expect(await storedCount()).toBe(30);
  });

  it('names the entry and the field of a list that stays invalid', async () => {
    const list = hooks(30);
    list[17]!.id = { value: 17 };
    for (const body of [{ webhooks: list }, list]) {
      listAnswer = body;
      const error = await failure(fx.api.webhooks.list());
      expect(error).toBeInstanceOf(ApiSchemaError);
      expect((error as ApiSchemaError).field).toBe('webhooks[17].id');
    }
    list[17]!.id = 'wh_'.padEnd(8000, 'x');
    listAnswer = { webhooks: list };
    expect(((await failure(fx.api.webhooks.list())) as Error).message).toBe(
      'GET /webhook returned an invalid body: webhooks[17].id: must be at most 500 characters',
    );
  });

  // One INSERT of 7 parameters a row holds at most 65,535 of them.
  it('records a list of 10,000 webhooks', async () => {
    listAnswer = { webhooks: hooks(10_000) };
    expect((await health()).states).toMatchObject({ active: 10_000 });
    expect(await storedCount()).toBe(10_000);
  });
});
