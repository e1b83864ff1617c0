import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { type ProvisionResult, provision } from '../../src/push/provision/provision.js';
import { parseProvisionFile } from '../../src/push/provision/provisionFile.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';

/** What the proxy does with one request: pass it on as is, or in its own way. */
type Intercept = (req: { method: string; path: string; body: string }) =>
  | {
      forward?: string | false;
      answer?: { status: number; body: unknown };
      /** Rewrites the platform's answer before it is passed on. */
      rewrite?: (text: string) => string;
    }
  | undefined;

/**
 * An HTTP proxy in front of the sandbox, over real sockets: it may rewrite the body it forwards
 * (the platform choosing another slug than the one sent), withhold a request, or answer in place of
 * the platform (a 502 from a gateway after the platform acted).
 */
async function startProxy(target: TestSandbox, intercept: Intercept) {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').replace(/^\/api\/v1\/partner/, '');
    const body = Buffer.concat(chunks).toString('utf8');
    const rule = intercept({ method, path, body }) ?? {};
    let status = 0;
    let text = '';
    if (rule.forward !== false) {
      const upstream = await fetch(`${target.url}${req.url}`, {
        method,
        headers: { 'x-api-key': target.apiKey, 'content-type': 'application/json' },
        body: method === 'GET' ? undefined : (rule.forward ?? body),
      });
      status = upstream.status;
      text = (rule.rewrite ?? ((t) => t))(await upstream.text());
    }
    if (rule.answer !== undefined) {
      status = rule.answer.status;
      text = JSON.stringify(rule.answer.body);
    }
    res.writeHead(status, { 'content-type': 'application/json' }).end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const BAD_GATEWAY = { status: 502, body: { error: 'Bad gateway' } };

/** The body sent, with the slug the platform chose in its place: the one sent is never found. */
const renamedSlug = (body: string) => {
  const sent = JSON.parse(body) as { slug: string };
  return JSON.stringify({ ...sent, slug: `${sent.slug}-x` });
};

/** A listing's answer without the record of `slug`: not shown yet. */
const withoutSlug = (text: string, slug: string) => {
  const page = JSON.parse(text) as { professionals: Array<{ slug: string }> };
  return JSON.stringify({ ...page, professionals: page.professionals.filter((p) => p.slug !== slug) });
};

/**
 * A create whose answer is lost is not sent again on the word of a slug that is not found: the
 * platform may have made it under another slug, or not show it yet. Provisioning runs in-process
 * here, against the sandbox behind a proxy, and the real database.
 */
describe('provisioning when a create answer is lost', () => {
  let sandbox: TestSandbox;
  let db: Db;
  beforeAll(async () => {
    sandbox = await testSandbox({ surveyDelayMs: 0, seed: 31 });
    db = await freshDb();
  });
  afterAll(async () => {
    await sandbox?.close();
    await db?.close();
  });

  const run = async (file: unknown, intercept: Intercept = () => undefined) => {
    const proxy = await startProxy(sandbox, intercept);
    const api = testApi({ url: proxy.url, apiKey: sandbox.apiKey });
    try {
      const retry = { maxRetries: 3, budgetMs: 10_000, baseDelayMs: 5, maxDelayMs: 20 };
      const options = { dryRun: false, waitMs: 0, concurrency: 2, retry };
      return await provision(
        { db, api, log: quietLog },
        parseProvisionFile(JSON.stringify(file)),
        options,
        {},
      );
    } finally {
      await api.close();
      await proxy.close();
    }
  };
  const byRecord = (results: ProvisionResult[]) =>
    Object.fromEntries(results.map((r) => [r.record, { outcome: r.outcome, slug: r.slug, error: r.error }]));
  const truth = () => sandbox.control.truth(sandbox.companyId);

  it('finds a location made under another slug by its name and address, and never creates it twice', async () => {
    const file = { locations: [{ name: 'Harbor Office', slug: 'harbor', city: 'Brest', zip: '29200' }] };
    let posts = 0;
    const results = await run(file, ({ method, body }) => {
      if (method !== 'POST') return undefined;
      // The first create is made under another slug, and its answer lost at a gateway.
      return ++posts === 1 ? { forward: renamedSlug(body), answer: BAD_GATEWAY } : undefined;
    });
    const harbors = (await truth()).locations.filter((l) => l.name === 'Harbor Office');
    expect(harbors.map((l) => l.slug)).toEqual(['harbor-x']);
    expect(posts).toBe(1);
    expect(byRecord(results)).toEqual({
      'locations[0] "Harbor Office"': { outcome: 'created', slug: 'harbor-x', error: null },
    });
    expect(results[0]!.id).toBe(String(harbors[0]!.id));
    expect(results[0]!.survey_url).toBe(harbors[0]!.default_survey_url);

    // A re-run does not find the slug of the file either: it creates nothing, and says why.
    const again = await run(file);
    expect(again[0]!.outcome).toBe('failed');
    expect(again[0]!.error).toMatch(
      /^slug harbor is not on the platform, but location 'Harbor Office' \(slug harbor-x, id \d+\) has this row's name and address/,
    );
    expect((await truth()).locations.filter((l) => l.name === 'Harbor Office')).toHaveLength(1);
  });

  it('finds again, by its name and address, a location without a slug that the platform made under another one', async () => {
    const file = { locations: [{ name: 'Quay Office', address_1: '1 Quay Street' }] };
    // Made, and answered, under a slug other than the one derived and sent.
    const first = await run(file, ({ method, body }) =>
      method === 'POST' ? { forward: renamedSlug(body) } : undefined,
    );
    expect(byRecord(first)['locations[0] "Quay Office"']).toEqual({
      outcome: 'created',
      slug: 'quay-office-x',
      error: null,
    });
    const again = await run(file);
    expect(byRecord(again)['locations[0] "Quay Office"']).toEqual({
      outcome: 'existed',
      slug: 'quay-office-x',
      error: null,
    });
    expect((await truth()).locations.filter((l) => l.name === 'Quay Office')).toHaveLength(1);
  });

  it('does not send again a location create whose answer was lost and that is found nowhere, and a re-run creates it', async () => {
    const file = { locations: [{ name: 'Lost Office', slug: 'lost-office' }] };
    let posts = 0;
    // The gateway answers 502 without passing the create on: nobody can tell it from one that landed.
    const results = await run(file, ({ method }) =>
      method === 'POST' && ++posts > 0 ? { forward: false, answer: BAD_GATEWAY } : undefined,
    );
    expect(posts).toBe(1);
    expect(results[0]!.outcome).toBe('failed');
    expect(results[0]!.error).toMatch(
      /^the create's answer was lost \(POST \/locations answered 502\), and no record with its slug or with the fields sent is found: not sent again, since it may still appear\. Check the account, then run again/,
    );
    expect((await truth()).locations.filter((l) => l.name === 'Lost Office')).toEqual([]);

    const again = await run(file);
    expect(byRecord(again)['locations[0] "Lost Office"']?.outcome).toBe('created');
    expect((await truth()).locations.filter((l) => l.name === 'Lost Office')).toHaveLength(1);
  });

  it('finds a professional made under another slug among those listed since, without sending the create again', async () => {
    const file = {
      professionals: [{ first_name: 'Ada', last_name: 'Quay', email: 'ada@lost.example', slug: 'ada-quay' }],
    };
    let posts = 0;
    const results = await run(file, ({ method, body }) => {
      if (method !== 'POST') return undefined;
      return ++posts === 1 ? { forward: renamedSlug(body), answer: BAD_GATEWAY } : undefined;
    });
    const made = (await truth()).professionals.filter((p) => p.email === 'ada@lost.example');
    expect(made.map((p) => p.slug)).toEqual(['ada-quay-x']);
    expect(posts).toBe(1);
    expect(byRecord(results)).toEqual({
      'professionals[0] "ada@lost.example"': { outcome: 'created', slug: 'ada-quay-x', error: null },
    });
    expect(results[0]!.id).toBe(made[0]!.id);
    expect(results[0]!.survey_url).toBe(made[0]!.default_survey_url);
    expect((await truth()).invites.filter((i) => i.email === 'ada@lost.example')).toHaveLength(1);

    // A re-run cannot find them by the file's slug, and the platform refuses the email (409): the
    // report names the professional of that name, for the operator to give the row their slug.
    const again = await run(file);
    expect(again[0]!.outcome).toBe('failed');
    expect(again[0]!.error).toBe(
      "A user with this email already exists; a professional of this name is on the platform (slug ada-quay-x): if this row's, give it that slug",
    );
    expect((await truth()).invites.filter((i) => i.email === 'ada@lost.example')).toHaveLength(1);
  });

  it('reports as created a professional the re-sent create finds taken (409), once listed', async () => {
    const file = {
      professionals: [{ first_name: 'Bo', last_name: 'Late', email: 'bo@lost.example', slug: 'bo-late' }],
    };
    let posts = 0;
    let listings = 0;
    const results = await run(file, ({ method, path, body }) => {
      if (method === 'POST') {
        return ++posts === 1 ? { forward: renamedSlug(body), answer: BAD_GATEWAY } : undefined;
      }
      // The listing after the lost create does not show it yet: the create is sent again.
      if (posts === 1 && path.startsWith('/professionals?') && ++listings <= 2) {
        return { rewrite: (text) => withoutSlug(text, 'bo-late-x') };
      }
      return undefined;
    });
    const made = (await truth()).professionals.filter((p) => p.email === 'bo@lost.example');
    expect(made.map((p) => p.slug)).toEqual(['bo-late-x']);
    expect(posts).toBe(2);
    expect(byRecord(results)).toEqual({
      'professionals[0] "bo@lost.example"': { outcome: 'created', slug: 'bo-late-x', error: null },
    });
    expect((await truth()).invites.filter((i) => i.email === 'bo@lost.example')).toHaveLength(1);
  });

  it('creates professionals while their listing fails, and no location while theirs does', async () => {
    const file = {
      locations: [{ name: 'Unlisted Office', slug: 'unlisted-office' }],
      professionals: [{ first_name: 'Cy', last_name: 'Unlisted', email: 'cy@unlisted.example' }],
    };
    const listingDown = {
      forward: false as const,
      answer: { status: 500, body: { error: 'Internal server error' } },
    };
    const results = await run(file, ({ method, path }) =>
      method === 'GET' && /^\/(locations|professionals)\?/.test(path) ? listingDown : undefined,
    );
    expect(results.map((r) => [r.record, r.outcome])).toEqual([
      ['locations[0] "Unlisted Office"', 'failed'],
      ['professionals[0] "cy@unlisted.example"', 'created'],
    ]);
    // Without the listing, nobody can tell whether the platform holds the location under another slug.
    expect(results[0]!.error).toMatch(/^GET \/locations /);
    const platform = await truth();
    expect(platform.locations.filter((l) => l.name === 'Unlisted Office')).toEqual([]);
    expect(platform.professionals.filter((p) => p.last_name === 'Unlisted')).toHaveLength(1);
  });
});
