import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { provisionCommand } from '../../src/commands/provision.js';
import type { Db } from '../../src/db/connect.js';
import type { RetryPolicy } from '../../src/partner-api/retryPolicy.js';
import { plannedResults, provision } from '../../src/push/provision/provision.js';
import { parseProvisionFile } from '../../src/push/provision/provisionFile.js';
import { dropSchema, freshDb, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { type FakeAnswer, type FakeRequest, startFakePlatform } from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';
import { testApi } from '../pull/helpers.js';

const NOT_FOUND = { status: 404, body: { error: 'Not found' } };
const emptyListing = (key: 'locations' | 'professionals') => ({
  status: 200,
  body: { [key]: [], pagination: { count: 0, has_more: false, next_cursor: null } },
});
const location = (over: Record<string, unknown> = {}) => ({
  id: 7,
  slug: 'annex',
  name: 'Annex',
  active: true,
  address: { line1: null, line2: null, city: null, state: null, zip: null },
  profile_url: 'https://reviews.example/l/annex',
  default_survey_url: null,
  created_at: '2026-11-27T00:00:00Z',
  ...over,
});

/** Provisioning at its edges, in-process against a fake platform: each test names what went wrong before. */
describe('provisioning at its edges', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => {
    await db?.close();
  });

  const run = async (
    file: unknown,
    answer: (req: FakeRequest) => FakeAnswer,
    over: { retry?: RetryPolicy; waitMs?: number; signal?: AbortSignal } = {},
  ) => {
    const platform = await startFakePlatform(answer);
    const retry = over.retry ?? { maxRetries: 2, budgetMs: 10_000, baseDelayMs: 1, maxDelayMs: 2 };
    const api = testApi({ url: platform.url, apiKey: 'rm-test-key' }, { retry });
    const plan = parseProvisionFile(JSON.stringify(file));
    const results = plannedResults(plan);
    try {
      // What stopped the run, if anything: the report (`results`) says how far it got.
      const stopped = await provision(
        { db, api, log: quietLog },
        plan,
        { dryRun: false, waitMs: over.waitMs ?? 0, concurrency: 2, retry },
        {},
        over.signal,
        results,
      ).then(
        () => undefined,
        (error: unknown) => error,
      );
      return { results, stopped, requests: platform.requests() };
    } finally {
      await api.close();
      await platform.close();
    }
  };

  it('retries a create refused 429 no more than API_MAX_RETRIES times, then stops the run, failing no record', async () => {
    const posts = new Map<string, number>();
    const file = { locations: ['Annex', 'Bay', 'Cove', 'Dune'].map((name) => ({ name })) };
    const { results, stopped } = await run(file, (req) => {
      if (req.method === 'POST') {
        const { name } = JSON.parse(req.body) as { name: string };
        posts.set(name, (posts.get(name) ?? 0) + 1);
        return { status: 429, body: { error: 'Too many requests' } };
      }
      return req.path === '/locations' ? emptyListing('locations') : NOT_FOUND;
    });
    // One attempt and API_MAX_RETRIES (2) retries, as every other request of the client
    // (docs/push.md). Before: the transport retries a POST's 429 itself, and createOnce retried
    // each of its give-ups again, so (1 + 2) * (1 + 2) = 9 were sent, the time budget spent twice.
    expect(posts.get('Annex')).toBe(3);
    expect(Math.max(...posts.values())).toBe(3);
    // "A 429 never fails the whole run": each record failed in turn against a platform asking for
    // less. The run stops; nothing was created, and nothing is failed, for a re-run after the wait.
    expect(String(stopped)).toMatch(/POST \/locations answered 429/);
    expect(results.map((r) => r.outcome)).toEqual([
      'not-attempted',
      'not-attempted',
      'not-attempted',
      'not-attempted',
    ]);
    expect(posts.has('Dune')).toBe(false);
  });

  it('fails only the row whose slug the platform redirects, naming the slug it leads to, not REVIEWS_API_URL', async () => {
    const file = {
      locations: [
        { name: 'Annex', slug: 'annex' },
        { name: 'Bay', slug: 'bay' },
        { name: 'Cove', slug: 'cove' },
      ],
    };
    const { results } = await run(file, (req) => {
      if (req.path === '/locations/annex') {
        // An old slug the platform keeps redirecting to the record's new one.
        return { status: 301, body: '', headers: { location: '/api/v1/partner/locations/annex-east' } };
      }
      if (req.path === '/locations/cove') {
        // The same path on another host: this is the base URL moving, not the record.
        return {
          status: 301,
          body: '',
          headers: { location: 'https://moved.example/api/v1/partner/locations/cove' },
        };
      }
      if (req.method === 'POST') return { status: 201, body: location({ id: 8, slug: 'bay', name: 'Bay' }) };
      return req.path === '/locations' ? emptyListing('locations') : NOT_FOUND;
    });
    const [annex, bay, cove] = results;
    expect(annex).toMatchObject({ outcome: 'failed' });
    expect(annex!.error).toMatch(/slug annex is redirected by the platform to location slug annex-east/);
    expect(annex!.error).toMatch(/if it is the same location, write slug annex-east in the file/);
    expect(annex!.error).not.toMatch(/REVIEWS_API_URL/);
    expect(bay).toMatchObject({ outcome: 'created', slug: 'bay' });
    expect(cove).toMatchObject({ outcome: 'failed' });
    expect(cove!.error).toMatch(/REVIEWS_API_URL/);
  });

  it("fails a row whose slug read answers 200 with an error by the platform's words, scrubbed, not as a schema error", async () => {
    const file = {
      locations: [{ name: 'Annex', slug: 'annex' }],
      professionals: [{ first_name: 'Ann', last_name: 'Lee', email: 'ann@x.example', slug: 'ann-lee' }],
    };
    const { results } = await run(file, (req) => {
      if (req.path === '/locations/annex' || req.path === '/professionals/ann-lee') {
        return { status: 200, body: { error: 'lookup refused for api key rm-test-key' } };
      }
      if (req.method === 'POST') throw new Error('nothing is to be created');
      return NOT_FOUND;
    });
    expect(results.map((r) => r.outcome)).toEqual(['failed', 'failed']);
    for (const result of results) {
      expect(result.error).toMatch(
        /answered 200 with an error instead of the record: lookup refused for api key/,
      );
      expect(result.error).not.toMatch(/invalid body/);
      expect(result.error).not.toContain('rm-test-key');
    }
  });

  it('waits the whole PROVISION_WAIT_SECONDS for a survey URL before saying it was not ready', async () => {
    // The location's survey URL appears 1.5 s after its create: within the 2 s the run waits.
    let createdAt: number | undefined;
    const { results } = await run(
      { locations: [{ name: 'Annex', slug: 'annex' }] },
      (req) => {
        if (req.method === 'POST') {
          createdAt = Date.now();
          return { status: 201, body: location() };
        }
        if (req.path === '/locations') return emptyListing('locations');
        if (createdAt === undefined) return NOT_FOUND;
        const ready = Date.now() - createdAt >= 1_500;
        return {
          status: 200,
          body: location({ default_survey_url: ready ? 'https://s.example/annex' : null }),
        };
      },
      { waitMs: 2_000 },
    );
    expect(results[0]).toMatchObject({
      outcome: 'created',
      survey_url: 'https://s.example/annex',
      error: null,
    });
  });

  it('reads a file whose record repeats a field as a bad record, not as a file that is neither YAML nor JSON', () => {
    // Valid JSON (RFC 8259 only says names SHOULD be unique), one record of which repeats `name`.
    const source =
      '{"locations": [{"name": "Annex", "name": "Annexe"}, {"name": "Downtown"}], "professionals": []}';
    let plan: ReturnType<typeof parseProvisionFile> | undefined;
    let refused: unknown;
    try {
      plan = parseProvisionFile(source);
    } catch (error) {
      refused = error;
    }
    expect(String(refused ?? '')).not.toMatch(/neither YAML nor JSON/);
    expect(plan?.locations.map((l) => l.label)).toEqual(['locations[1] "Downtown"']);
    expect(plan?.invalid.map((r) => `${r.label}: ${r.reason}`)).toEqual([
      expect.stringMatching(/^locations\[0\].*: has the field name twice/),
    ]);
  });

  it('names a set-aside location of the file, not "neither in the file nor on the platform", when a professional names it', async () => {
    const file = {
      locations: [{ name: 'Annex', slug: 'annex', colour: 'blue' }],
      professionals: [{ first_name: 'Ann', last_name: 'Lee', email: 'ann@x.example', location: 'annex' }],
    };
    const { results } = await run(file, (req) => {
      if (req.method === 'POST') throw new Error('nothing is to be created');
      return req.path === '/professionals' || req.path === '/locations'
        ? emptyListing(req.path.slice(1) as 'locations')
        : NOT_FOUND;
    });
    expect(results.map((r) => [r.record, r.outcome, r.error])).toEqual([
      ['locations[0] "Annex"', 'failed', 'has an unknown field colour'],
      [
        'professionals[0] "ann@x.example"',
        'failed',
        expect.stringMatching(/^its location annex was not created \(locations\[0\] "Annex"/),
      ],
    ]);
  });

  it('refuses a provisioning file that is not UTF-8 instead of creating names with U+FFFD in them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-provision-edges-'));
    const schema = uniqueSchema('prova');
    const sent: string[] = [];
    const platform = await startFakePlatform((req) => {
      if (req.method === 'POST') {
        sent.push(req.body);
        return {
          status: 201,
          body: location({ slug: 'cafe', name: (JSON.parse(req.body) as { name: string }).name }),
        };
      }
      return req.path === '/locations' ? emptyListing('locations') : NOT_FOUND;
    });
    // Saved by a Windows tool in its own code page: "Café" is 43 61 66 E9.
    const file = join(dir, 'offices.yaml');
    await writeFile(file, Buffer.from('locations:\n  - name: Caf\xe9\n    slug: cafe\n', 'latin1'));
    vi.stubEnv('REVIEWS_API_URL', platform.url);
    vi.stubEnv('REVIEWS_API_KEY', 'rm-test-key');
    vi.stubEnv('LOG_LEVEL', 'silent');
    if (TEST_DATABASE_URL === undefined) vi.stubEnv('DATA_DIR', join(dir, 'data'));
    else {
      vi.stubEnv('DATABASE_URL', TEST_DATABASE_URL);
      vi.stubEnv('DB_SCHEMA', schema);
    }
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      const outcome = await provisionCommand()
        .exitOverride()
        .parseAsync([file, '--no-wait'], { from: 'user' })
        .then(
          () => 'done',
          (error: unknown) => String(error),
        );
      expect(sent.filter((body) => body.includes('\ufffd'))).toEqual([]);
      expect(outcome).toMatch(/the file is not UTF-8 text \(line 2\): save it as UTF-8/);
    } finally {
      stdout.mockRestore();
      vi.unstubAllEnvs();
      process.exitCode = undefined;
      await platform.close();
      await dropSchema(schema);
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('ends the wait for survey URLs near PROVISION_WAIT_SECONDS when the re-reads hang', async () => {
    // The create answers; every read after it hangs, so each is timed out and retried by the client.
    let created = false;
    const server = createServer((req, res) => {
      const path = (req.url ?? '').replace(/^\/api\/v1\/partner/, '');
      const send = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (req.method === 'POST') {
        created = true;
        return send(201, location());
      }
      if (path.startsWith('/locations?')) return send(200, emptyListing('locations').body);
      if (!created) return send(404, NOT_FOUND.body);
      // No answer: the client's request timeout ends it.
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const retry = { maxRetries: 30, budgetMs: 20_000, baseDelayMs: 5, maxDelayMs: 50 };
    const api = testApi(
      { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'rm-test-key' },
      { retry, requestTimeoutMs: 1_000 },
    );
    const started = Date.now();
    try {
      const results = await provision(
        { db, api, log: quietLog },
        parseProvisionFile(JSON.stringify({ locations: [{ name: 'Annex', slug: 'annex' }] })),
        { dryRun: false, waitMs: 1_000, concurrency: 2, retry },
        {},
      );
      expect(results[0]).toMatchObject({ outcome: 'created', survey_url: null });
      expect(results[0]!.error).toMatch(/^its survey URL was not ready after 1 s/);
      // The wait, and one poll's grace for a read begun within it: not the client's whole retry budget.
      expect(Date.now() - started).toBeLessThan(8_000);
    } finally {
      await api.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
