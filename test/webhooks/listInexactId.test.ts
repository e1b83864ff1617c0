import { afterEach, describe, expect, it, vi } from 'vitest';
import { webhooksCommand } from '../../src/commands/webhooks.js';
import { saveRegistration } from '../../src/webhooks/webhooksSql.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { fakePlatformFixture } from '../pull/helpers.js';

const URL = 'https://mirror.example.com/webhooks/review-created';
const SECRET = 'whsec_list_inexact_ours_1';
const LEAKED = 'whsec_listed_by_mistake_2';
const KEY = 'rm_test_key_123456';

/** `review-mirror webhooks <args>`, run in this process: what it printed on stdout and stderr. */
async function runWebhooks(args: string[], env: Record<string, string>) {
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => out.push(String(chunk)) > 0);
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => err.push(String(chunk)) > 0);
  try {
    await webhooksCommand().parseAsync(args, { from: 'user' });
  } finally {
    vi.restoreAllMocks();
    vi.unstubAllEnvs();
  }
  return { stdout: out.join(''), stderr: err.join('') };
}

/**
 * `webhooks list` with a webhook whose id the platform sent as a number past 2^53: it was
 * refused whole, so the operator could not even see the list it had to fix by hand. The entry is
 * shown without an id, named by its place; the others as usual.
 */
describe('`webhooks list` with a numeric webhook id past 2^53', () => {
  const fx = fakePlatformFixture(({ method, path }) => {
    if (path !== '/webhook' || method !== 'GET') return { status: 404, body: { error: 'not found' } };
    return {
      status: 200,
      body: `[{"id":"wh_ours","url":"${URL}","is_active":true},{"id":9007199254740993,"url":"${URL}","is_active":true,"last_error":"HTTP 500","signing_secret":"${LEAKED}"}]`,
    };
  });
  afterEach(() => {
    vi.restoreAllMocks();
    vi.unstubAllEnvs();
  });

  // On a schema of its own on the local server, as the built CLI's tests run it.
  it('shows it without an id, warns naming its place and URL, and records the rest', async () => {
    const db = await freshDb({ url: POSTGRES_URL });
    try {
      await saveRegistration(db.knex, db, { id: 'wh_ours', url: URL, signing_secret: SECRET });
      const env = {
        DATABASE_URL: POSTGRES_URL,
        DB_SCHEMA: db.schema,
        REVIEWS_API_URL: fx.platform.url,
        REVIEWS_API_KEY: KEY,
        LOG_LEVEL: 'warn',
      };
      const json = await runWebhooks(['list', '--json'], env);
      expect(JSON.parse(json.stdout)).toEqual([
        {
          id: 'wh_ours',
          id_problem: null,
          url: URL,
          state: 'active',
          is_active: true,
          last_error: null,
          secret_stored: true,
        },
        {
          id: null,
          id_problem:
            'webhooks[1].id is a number past 2^53 (read as 9007199254740992), which JSON cannot carry exactly',
          url: URL,
          state: 'failing',
          is_active: true,
          last_error: 'HTTP 500',
          secret_stored: false,
        },
      ]);
      expect(json.stderr).toBe(
        `review-mirror: webhooks[1].id is a number past 2^53 (read as 9007199254740992), which JSON cannot carry exactly: this webhook (${URL}) is never matched, recorded or deleted here; delete it by hand if it is not wanted (\`review-mirror webhooks delete <its id as the platform shows it>\`)\n`,
      );

      const table = await runWebhooks(['list'], env);
      const lines = table.stdout.split('\n');
      expect(lines[1]).toMatch(/^wh_ours\s+\S+\s+active\s+stored\s*$/);
      expect(lines[2]).toMatch(/^\?\s+\S+\s+failing\s+-\s+HTTP 500$/);
      expect(table.stderr).toBe(json.stderr);
      for (const text of [json.stdout, json.stderr, table.stdout]) {
        expect(text).not.toContain(LEAKED);
        expect(text).not.toContain(SECRET);
      }
      const rows = await db.knex(db.table('webhooks')).orderBy('id').select('id', 'checked_at');
      expect(rows).toEqual([{ id: 'wh_ours', checked_at: expect.any(Date) }]);
    } finally {
      await db.close();
    }
  });
});
