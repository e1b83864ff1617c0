import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDb } from '../../src/db/connect.js';
import { CliProcess, cliEnv, runCli } from '../helpers/cli.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { startFakePlatform } from '../helpers/fakePlatform.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';

/** `outcome kind slug id url-or-error record` lines of the report, by slug. */
function reportLines(
  stdout: string,
): Map<string, { outcome: string; kind: string; id: string; rest: string }> {
  const lines = stdout.trim().split('\n').slice(1);
  return new Map(
    lines.map((line) => {
      const [outcome, kind, slug, id, ...rest] = line.split(/\s+/);
      return [slug!, { outcome: outcome!, kind: kind!, id: id!, rest: rest.join(' ') }];
    }),
  );
}

/** A page of a directory listing with nothing on it (spec 4.4, 4.5). */
const emptyListing = (key: 'locations' | 'professionals') => ({
  status: 200,
  body: { [key]: [], pagination: { count: 0, has_more: false, next_cursor: null } },
});

const office = (i: number) => ({
  name: `Office ${i}`,
  ...(i % 2 === 0 ? { slug: `office-${i}` } : {}),
  city: 'Lyon',
});
const person = (i: number, domain: string) => ({
  first_name: `First${i}`,
  last_name: `Last${i}`,
  email: `person${i}@${domain}`,
  ...(i % 2 === 0 ? { slug: `person-${i}-${domain.split('.')[0]}` } : {}),
  location: `office-${i % 10}`,
});

/**
 * `review-mirror provision` against the sandbox and the real PostgreSQL server: each record
 * created once whatever happens, every survey URL printed, per-record errors.
 */
describe('provisioning locations and professionals', () => {
  let sandbox: TestSandbox;
  let dir: string;
  const schemas: string[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ surveyDelayMs: 1_000, seed: 12 });
    dir = await mkdtemp(join(tmpdir(), 'rm-provision-'));
  });
  afterAll(async () => {
    await sandbox?.close();
    for (const schema of schemas) await dropSchema(schema, POSTGRES_URL);
    await rm(dir, { recursive: true, force: true });
  });

  const envFor = (target: Pick<TestSandbox, 'url' | 'apiKey'>, vars: Record<string, string> = {}) => {
    const schema = uniqueSchema('prov');
    schemas.push(schema);
    return cliEnv({
      DATABASE_URL: POSTGRES_URL,
      DB_SCHEMA: schema,
      REVIEWS_API_URL: target.url,
      REVIEWS_API_KEY: target.apiKey,
      LOG_LEVEL: 'error',
      ...vars,
    });
  };
  const write = async (name: string, content: unknown) => {
    const path = join(dir, name);
    await writeFile(path, name.endsWith('.json') ? JSON.stringify(content) : stringify(content));
    return path;
  };

  it('creates 10 locations and 40 professionals once, prints every survey URL, and creates nothing on a re-run', {
    timeout: 120_000,
  }, async () => {
    // Half the locations have no slug: "Office 1" is created and found again as office-1.
    const file = await write('team.yaml', {
      locations: Array.from({ length: 10 }, (_, i) => office(i)),
      professionals: Array.from({ length: 40 }, (_, i) => person(i, 'team.example')),
    });
    const env = envFor(sandbox);
    const first = await runCli(['provision', file, '--report', join(dir, 'team.csv')], env);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const created = reportLines(first.stdout);
    expect(created.size).toBe(50);
    for (const [slug, line] of created) {
      expect({ slug, outcome: line.outcome }).toEqual({ slug, outcome: 'created' });
      expect(line.rest).toMatch(/^https:\/\/reviews\.sandbox\.test\/s\/[0-9a-f]+ /);
    }
    expect(created.get('office-1')?.kind).toBe('location');

    const again = await runCli(['provision', file], env);
    expect(again.code).toBe(0);
    const existed = reportLines(again.stdout);
    for (const [slug, line] of created) {
      expect(existed.get(slug)).toEqual({ ...line, outcome: 'existed' });
    }

    // The platform's own truth after both runs: each record of the file exactly once, with the
    // slug and id the report printed (a slug-less one not doubled under a second generated slug),
    // and one invite per professional.
    const truth = await sandbox.control.truth(sandbox.companyId);
    const reported = (kind: string) =>
      [...created].filter(([, line]) => line.kind === kind).map(([slug, line]) => `${slug} ${line.id}`);
    const offices = truth.locations.filter((l) => /^Office \d$/.test(l.name));
    expect(offices.map((l) => l.name).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `Office ${i}`));
    expect(offices.map((l) => `${l.slug} ${l.id}`).sort()).toEqual(reported('location').sort());
    const team = truth.professionals.filter((p) => p.email.endsWith('@team.example'));
    expect(team.map((p) => p.email).sort()).toEqual(
      Array.from({ length: 40 }, (_, i) => `person${i}@team.example`).sort(),
    );
    expect(team.map((p) => `${p.slug} ${p.id}`).sort()).toEqual(reported('professional').sort());
    expect(truth.invites).toHaveLength(40);
    expect(truth.invites.map((i) => i.professional_id).sort()).toEqual(team.map((p) => p.id).sort());
    const csv = await readFile(join(dir, 'team.csv'), 'utf8');
    expect(csv.split('\n')[0]).toBe('kind,record,slug,outcome,id,survey_url,error');
    expect(csv.trim().split('\n')).toHaveLength(51);

    // The survey URLs are in the mirror, and each professional has its location.
    const db = await openDb({ url: POSTGRES_URL, schema: env.DB_SCHEMA!, poolMax: 1, dataDir: undefined });
    try {
      const pros = await db.knex(db.table('professionals')).whereNotNull('default_survey_url').count();
      expect(Number(pros[0]!.count)).toBe(40);
      const placed = await db.knex(db.table('professionals')).whereNotNull('location_id').count();
      expect(Number(placed[0]!.count)).toBe(40);
      const offices = await db.knex(db.table('locations')).whereNotNull('default_survey_url').count();
      expect(Number(offices[0]!.count)).toBe(10);
    } finally {
      await db.close();
    }
  });

  it('reports a taken email (409), an invalid slug (422) and an unknown location with their reasons, and creates the rest', {
    timeout: 60_000,
  }, async () => {
    const file = await write('mixed.json', {
      locations: [{ name: 'Annex', slug: 'annex' }],
      professionals: [
        { first_name: 'Taken', last_name: 'Email', email: 'person3@team.example', slug: 'taken-email' },
        { first_name: 'Bad', last_name: 'Slug', email: 'bad@mixed.example', slug: 'Bad Slug!' },
        { first_name: 'Lost', last_name: 'Office', email: 'lost@mixed.example', location: 'no-such-office' },
        { first_name: 'Fine', last_name: 'One', email: 'fine1@mixed.example', location: 'annex' },
        { first_name: 'Fine', last_name: 'Two', email: 'fine2@mixed.example', location: 'office-0' },
      ],
    });
    const report = join(dir, 'mixed-report.json');
    const result = await runCli(['provision', file, '--report', report], envFor(sandbox));
    expect(result.code).toBe(1);
    const rows = JSON.parse(await readFile(report, 'utf8')) as Array<Record<string, string | null>>;
    expect(rows.map((r) => [r.record, r.outcome, r.error])).toEqual([
      ['locations[0] "Annex"', 'created', null],
      ['professionals[0] "person3@team.example"', 'failed', 'A user with this email already exists'],
      [
        'professionals[1] "bad@mixed.example"',
        'failed',
        'slug may contain only lowercase letters, digits and hyphens',
      ],
      [
        'professionals[2] "lost@mixed.example"',
        'failed',
        'location no-such-office is neither in the file nor on the platform',
      ],
      ['professionals[3] "fine1@mixed.example"', 'created', null],
      ['professionals[4] "fine2@mixed.example"', 'created', null],
    ]);
    expect(Object.keys(rows[0]!)).toEqual(['kind', 'record', 'slug', 'outcome', 'id', 'survey_url', 'error']);
    expect(result.stdout).toContain('A user with this email already exists');
  });

  it('fails a location whose derived slug is another location of another name, and still finds its own on a re-run', {
    timeout: 60_000,
  }, async () => {
    // Names in a non-Latin script all derive `location`; long names sharing their first 60 slug
    // characters derive one slug too.
    const long = 'Riverside Family Medicine and Pediatric Care Center of Greater Springfield';
    const slug = 'riverside-family-medicine-and-pediatric-care-center-of-great';
    const env = envFor(sandbox);
    const opened = await write('opened.json', {
      locations: [{ name: 'Клиника Москва', city: 'Moscow' }, { name: `${long} North` }],
    });
    const first = await runCli(['provision', opened, '--no-wait'], env);
    expect(first.code).toBe(0);
    const created = reportLines(first.stdout);
    expect([...created].map(([s, l]) => [s, l.outcome])).toEqual([
      ['location', 'created'],
      [slug, 'created'],
    ]);

    const later = await write('later.json', {
      locations: [{ name: 'Клиника Санкт-Петербург' }, { name: `${long} South` }],
      professionals: [{ first_name: 'Ann', last_name: 'South', email: 'ann@south.example', location: slug }],
    });
    for (const flags of [['--dry-run'], []]) {
      const report = join(dir, `later-${flags.length}.json`);
      const second = await runCli(['provision', later, '--no-wait', '--report', report, ...flags], env);
      expect(second.code).toBe(1);
      const rows = JSON.parse(await readFile(report, 'utf8')) as Array<Record<string, string | null>>;
      expect(rows.map((r) => [r.outcome, r.id, r.survey_url, r.error])).toEqual([
        ['failed', null, null, "slug location belongs to location 'Клиника Москва'; give this row a slug"],
        ['failed', null, null, `slug ${slug} belongs to location '${long} North'; give this row a slug`],
        ['failed', null, null, `its location ${slug} was not created (locations[1] "${long} South" failed)`],
      ]);
    }

    const again = await runCli(['provision', opened, '--no-wait'], env);
    expect(again.code).toBe(0);
    for (const [s, line] of reportLines(again.stdout)) {
      expect(line).toEqual({ ...created.get(s), outcome: 'existed', rest: line.rest });
    }
    const truth = await sandbox.control.truth(sandbox.companyId);
    expect(truth.locations.filter((l) => l.name.includes('Клиника') || l.name.startsWith(long))).toHaveLength(
      2,
    );
    expect(truth.professionals.filter((p) => p.last_name === 'South')).toEqual([]);
  });

  it('reports what an interrupted run created, and what it never attempted, and exits non-zero', {
    timeout: 60_000,
  }, async () => {
    const file = await write('stopped.yaml', {
      // Named apart from the first test's offices: a location of the same name and address under
      // another slug is taken for the row's own, made earlier under another slug, and not created.
      locations: [office(0), office(1)].map((o) => ({
        ...o,
        name: `${o.name} Stop`,
        slug: `${o.name.toLowerCase().replace(' ', '-')}-stop`,
      })),
      professionals: Array.from({ length: 12 }, (_, i) => ({
        ...person(i, 'stop.example'),
        location: `office-${i % 2}-stop`,
      })),
    });
    const report = join(dir, 'stopped.csv');
    const env = envFor(sandbox);
    const mine = async () =>
      (await sandbox.control.truth(sandbox.companyId)).professionals.filter((p) =>
        p.email.endsWith('@stop.example'),
      );
    // Every request held a while: the run is still creating professionals when it is stopped.
    await sandbox.control.setFaults({ partner: { delay: 1, delayMs: 300 } });
    let stopped: Awaited<CliProcess['exited']>;
    try {
      const cli = new CliProcess(['provision', file, '--no-wait', '--report', report], env);
      const deadline = Date.now() + 30_000;
      while ((await mine()).length === 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      cli.kill('SIGTERM');
      stopped = await cli.exited;
    } finally {
      await sandbox.control.setFaults({});
    }
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toMatch(
      /provisioning stopped: \d+ of 14 records done, \d+ interrupted \(run again: found by their slugs\), \d+ not attempted: interrupted by SIGTERM/,
    );
    const lines = reportLines(stopped.stdout);
    expect(lines.size).toBe(14);
    const outcomes = [...lines.values()].map((l) => l.outcome);
    expect(outcomes.filter((o) => !['created', 'interrupted', 'not-attempted'].includes(o))).toEqual([]);
    expect(outcomes).toContain('not-attempted');
    expect(lines.get('office-0-stop')?.outcome).toBe('created');
    // Whatever reached the platform is in the report: created with its id, or interrupted.
    const onPlatform = await mine();
    expect(onPlatform.length).toBeGreaterThan(0);
    for (const p of onPlatform) {
      const line = lines.get(p.slug);
      expect({ slug: p.slug, outcome: line?.outcome }).toEqual({
        slug: p.slug,
        outcome: expect.stringMatching(/^(created|interrupted)$/),
      });
      if (line?.outcome === 'created') expect(line.id).toBe(p.id);
    }
    const csv = (await readFile(report, 'utf8')).trim().split('\n');
    expect(csv).toHaveLength(15);
    expect(csv.filter((row) => row.includes(',not-attempted,'))).toHaveLength(
      outcomes.filter((o) => o === 'not-attempted').length,
    );

    // A re-run finds what was created by its slug and creates the rest: one record, one invite each.
    const again = await runCli(['provision', file, '--no-wait'], env);
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    const truth = await sandbox.control.truth(sandbox.companyId);
    expect((await mine()).length).toBe(12);
    expect(truth.invites.filter((i) => i.email.endsWith('@stop.example'))).toHaveLength(12);
  });

  it('reports as interrupted, not failed, a record whose create was lost before the key was refused', {
    timeout: 60_000,
  }, async () => {
    // The create answered 500 (it may have landed), then reading its slug back is refused (401).
    let reads = 0;
    const platform = await startFakePlatform((req) => {
      if (req.method === 'POST') return { status: 500, body: { error: 'Internal server error' } };
      if (req.path === '/locations') return emptyListing('locations');
      reads++;
      return reads === 1
        ? { status: 404, body: { error: 'Not found' } }
        : { status: 401, body: { error: 'Invalid API key' } };
    });
    try {
      const file = await write('refused.yaml', {
        locations: [{ name: 'Refused Office', slug: 'refused-office' }],
      });
      const stopped = await runCli(
        ['provision', file, '--no-wait'],
        envFor({ url: platform.url, apiKey: 'rm-test-key' }),
      );
      expect(stopped.code).toBe(1);
      expect(stopped.stderr).toMatch(
        /provisioning stopped: 0 of 1 records done, 1 interrupted \(run again: found by their slugs\), 0 not attempted: .*401/,
      );
      expect(reportLines(stopped.stdout).get('refused-office')?.outcome).toBe('interrupted');
      expect(reads).toBe(2);
    } finally {
      await platform.close();
    }
  });

  it('reports a create refused with no error text by what the platform answered', {
    timeout: 60_000,
  }, async () => {
    const platform = await startFakePlatform((req) => {
      if (req.method === 'POST') return { status: 405, body: '' };
      return req.path === '/locations'
        ? emptyListing('locations')
        : { status: 404, body: { error: 'Not found' } };
    });
    try {
      const file = await write('bare405.yaml', { locations: [{ name: 'Bare Office', slug: 'bare-office' }] });
      const result = await runCli(
        ['provision', file, '--no-wait'],
        envFor({ url: platform.url, apiKey: 'rm-test-key' }),
      );
      expect(result.code).toBe(1);
      const line = reportLines(result.stdout).get('bare-office');
      expect(line?.outcome).toBe('failed');
      expect(line?.rest).toContain('POST /locations answered 405: (no error text)');
    } finally {
      await platform.close();
    }
  });

  it('reports what was created when the database fails at the end of the run, and exits non-zero', {
    timeout: 60_000,
  }, async () => {
    const file = await write('dbdown.yaml', {
      locations: [{ name: 'Db Office', slug: 'db-office' }],
      professionals: [
        {
          first_name: 'Dee',
          last_name: 'Bee',
          email: 'dee@dbdown.example',
          slug: 'dee-bee',
          location: 'db-office',
        },
      ],
    });
    const env = envFor(sandbox);
    expect((await runCli(['migrate'], env)).code).toBe(0);
    // The mirror's table gone: storing what the platform returned fails after every create.
    const db = await openDb({ url: POSTGRES_URL, schema: env.DB_SCHEMA!, poolMax: 1, dataDir: undefined });
    try {
      await db.knex.raw('alter table ?? rename to locations_away', [db.table('locations')]);
    } finally {
      await db.close();
    }
    const result = await runCli(['provision', file, '--no-wait'], env);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /provisioning stopped: 2 of 2 records done, 0 interrupted .*, 0 not attempted: database: relation .*locations.* does not exist/,
    );
    const lines = reportLines(result.stdout);
    expect(lines.get('db-office')?.outcome).toBe('created');
    expect(lines.get('dee-bee')?.outcome).toBe('created');
  });

  it('prints what would be created in a dry run, checking references, and sends no POST', async () => {
    const before = await sandbox.control.requests();
    const file = await write('dry.yaml', {
      locations: [{ name: 'Office 1' }, { name: 'Brand New' }],
      professionals: [
        { first_name: 'New', last_name: 'Person', email: 'new@dry.example', location: 'brand-new' },
        { first_name: 'Nowhere', last_name: 'Person', email: 'nowhere@dry.example', location: 'nowhere' },
      ],
    });
    const result = await runCli(['provision', file, '--dry-run'], envFor(sandbox));
    const lines = reportLines(result.stdout);
    expect(lines.get('office-1')?.outcome).toBe('exists');
    expect(lines.get('brand-new')?.outcome).toBe('would-create');
    expect([...lines.values()].map((l) => l.outcome)).toEqual([
      'exists',
      'would-create',
      'would-create',
      'failed',
    ]);
    const after = await sandbox.control.requests();
    const posts = (counts: typeof before) =>
      Object.entries(counts.by_route)
        .filter(([route]) => route.startsWith('POST'))
        .reduce((n, [, statuses]) => n + Object.values(statuses).reduce((a, b) => a + b, 0), 0);
    expect(posts(after)).toBe(posts(before));
    expect(result.code).toBe(1); // the unknown location
  });

  it('provisions the example file shipped in config/ as documented', async () => {
    const example = fileURLToPath(new URL('../../config/provision.example.yaml', import.meta.url));
    const result = await runCli(['provision', example, '--no-wait'], envFor(sandbox));
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = reportLines(result.stdout);
    expect([...lines.keys()]).toEqual([
      'downtown',
      'riverside-clinic',
      'ann-lee',
      expect.stringMatching(/^omar-haddad-[0-9a-f]{6}$/),
      expect.stringMatching(/^mei-chen-[0-9a-f]{6}$/),
    ]);
    expect([...lines.values()].every((l) => l.outcome === 'created')).toBe(true);
  });

  it('creates nothing twice under 500s, hangs, cut bodies and POSTs that time out after the platform created the record', {
    timeout: 180_000,
  }, async () => {
    const faulty = await testSandbox({ surveyDelayMs: 500, seed: 77 });
    try {
      const file = await write('faulty.yaml', {
        locations: Array.from({ length: 5 }, (_, i) => office(i)),
        professionals: Array.from({ length: 20 }, (_, i) => person(i, 'faulty.example')).map((p) => ({
          ...p,
          location: `office-${Number(p.first_name.slice(5)) % 5}`,
        })),
      });
      const env = envFor(faulty, {
        API_REQUEST_TIMEOUT_SECONDS: '1',
        API_MAX_RETRIES: '8',
        PROVISION_WAIT_SECONDS: '30',
      });
      await faulty.control.setFaults({
        partner: {
          routes: ['/api/v1/partner/locations', '/api/v1/partner/professionals'],
          error500: 0.15,
          hang: 0.05,
          truncated: 0.1,
          // Made, then answered after the client stopped waiting: the record exists, the answer is lost.
          lateAnswer: 0.2,
          delay: 0.1,
          delayMs: 1_500,
          retryAfterSeconds: 0,
        },
      });
      const first = await runCli(['provision', file], env);
      // Whatever the faults left undone is reported as failed with a reason, never silently skipped.
      const firstLines = [...reportLines(first.stdout).values()];
      expect(firstLines).toHaveLength(25);
      for (const line of firstLines.filter((l) => l.outcome === 'failed')) expect(line.rest).not.toBe('');
      await faulty.control.setFaults({});
      const second = await runCli(['provision', file], env);
      expect(second.stderr).toBe('');
      expect(second.code).toBe(0);
      const lines = reportLines(second.stdout);
      expect([...lines.values()].every((l) => ['created', 'existed'].includes(l.outcome))).toBe(true);
      expect(lines.size).toBe(25);

      const truth = await faulty.control.truth(faulty.companyId);
      const counts = (await faulty.control.requests()).by_route;
      expect(truth.locations).toHaveLength(5);
      expect(truth.professionals).toHaveLength(20);
      expect(truth.invites).toHaveLength(20);
      expect(new Set(truth.invites.map((i) => i.email)).size).toBe(20);
      // The run did meet the faults injected, and still made one record each: at least one request
      // answered 500, and at least one create whose answer was lost after it was sent (held past
      // the client's timeout, or made and answered late). The sandbox's draws are seeded, but
      // which request meets which depends on the order they arrive in: the 500s, a fifth of the
      // failures, may all fall on the reads (the lookups after a lost answer, the survey waits).
      const statuses = (routes: readonly string[]) => {
        const met: Record<string, number> = {};
        for (const route of routes) {
          for (const [status, times] of Object.entries(counts[route] ?? {}))
            met[status] = (met[status] ?? 0) + times;
        }
        return met;
      };
      const creates = statuses(['POST /api/v1/partner/locations', 'POST /api/v1/partner/professionals']);
      const all = statuses(Object.keys(counts).filter((route) => /\/(locations|professionals)/.test(route)));
      const met = (of: Record<string, number>, match: (status: string) => boolean) =>
        Object.entries(of)
          .filter(([status]) => match(status))
          .reduce((n, [, times]) => n + times, 0);
      expect(
        met(all, (status) => status === '500'),
        JSON.stringify(all),
      ).toBeGreaterThan(0);
      expect(
        met(creates, (status) => status === 'hang' || status.endsWith(' late')),
        JSON.stringify(creates),
      ).toBeGreaterThan(0);
    } finally {
      await faulty.close();
    }
  });

  it('retries a failing create as API_MAX_RETRIES says, reading the slug back before each retry', {
    timeout: 60_000,
  }, async () => {
    const failing = await testSandbox({ surveyDelayMs: 200, seed: 9 });
    try {
      const file = await write('failing.yaml', {
        professionals: [
          { first_name: 'Never', last_name: 'Made', email: 'never@x.example', slug: 'never-made' },
        ],
      });
      // Every create answers 500 without making the record; reads pass.
      await failing.control.setFaults({ partner: { methods: ['POST'], error500: 1 } });
      const result = await runCli(['provision', file], envFor(failing, { API_MAX_RETRIES: '2' }));
      expect(result.code).toBe(1);
      const line = reportLines(result.stdout).get('never-made');
      expect(line?.outcome).toBe('failed');
      expect(line?.rest).toMatch(/^not created after 3 attempts: POST \/professionals answered 500/);
      const routes = (await failing.control.requests()).by_route;
      expect(routes['POST /api/v1/partner/professionals']).toEqual({ '500': 3 });
      // One read before the first create, then one after each create that failed.
      expect(routes['GET /api/v1/partner/professionals/:slug']).toEqual({ '404': 4 });
      expect((await failing.control.truth(failing.companyId)).invites).toEqual([]);
    } finally {
      await failing.close();
    }
  });

  it('resolves a create that timed out after the platform made it by reading the slug back: one record, one invite', {
    timeout: 60_000,
  }, async () => {
    const slow = await testSandbox({ surveyDelayMs: 200, seed: 5 });
    try {
      const file = await write('slow.yaml', {
        professionals: [1, 2, 3].map((i) => ({
          first_name: 'Slow',
          last_name: `P${i}`,
          email: `slow${i}@x.example`,
        })),
      });
      const env = envFor(slow, { API_REQUEST_TIMEOUT_SECONDS: '1' });
      // Every create is made, then answered 1.5 s later, when the client stopped waiting at 1 s.
      await slow.control.setFaults({ partner: { methods: ['POST'], lateAnswer: 1, delayMs: 1_500 } });
      const result = await runCli(['provision', file], env);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect([...reportLines(result.stdout).values()].map((l) => l.outcome)).toEqual([
        'created',
        'created',
        'created',
      ]);
      const truth = await slow.control.truth(slow.companyId);
      expect(truth.professionals).toHaveLength(3);
      expect(truth.invites.map((i) => i.email).sort()).toEqual([
        'slow1@x.example',
        'slow2@x.example',
        'slow3@x.example',
      ]);
      // Each lost answer was resolved by reading the slug back, never by a second POST.
      const routes = (await slow.control.requests()).by_route;
      const posts = Object.values(routes['POST /api/v1/partner/professionals'] ?? {}).reduce(
        (a, b) => a + b,
        0,
      );
      expect(posts).toBe(3);
    } finally {
      await slow.close();
    }
  });
});
