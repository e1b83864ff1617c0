import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crmExport } from '../../bench/crmExport.js';
import { cliEnv, runCli } from '../helpers/cli.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';

const PEOPLE = 100_000;
// The volume is the point here, not the backend: always the PostgreSQL server every machine has
// (the embedded database is covered by the other push tests).
const POSTGRES = POSTGRES_URL;

/**
 * The acceptance case: a 100,000-row export with 0.5% invalid rows and duplicate keys,
 * then the next export with 1% of the people changed. The sandbox's request count proves that
 * exactly the new and then exactly the changed contacts are sent, and nothing on a re-push.
 */
describe('contacts push of a 100,000-row export', () => {
  let sandbox: TestSandbox;
  let dir: string;
  const schema = uniqueSchema('big');
  let env: NodeJS.ProcessEnv;
  const first = crmExport({ people: PEOPLE, seed: 42, version: 0 });
  const next = crmExport({ people: PEOPLE, seed: 42, version: 1 });

  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 8 });
    dir = await mkdtemp(join(tmpdir(), 'rm-big-'));
    env = cliEnv({
      REVIEWS_API_URL: sandbox.url,
      REVIEWS_API_KEY: sandbox.apiKey,
      DATABASE_URL: POSTGRES,
      DB_SCHEMA: schema,
      DATA_DIR: join(dir, 'data'),
      CONTACTS_CONCURRENCY: '16',
      CONTACTS_RATE_PER_SECOND: '100000',
    });
  });
  afterAll(async () => {
    await sandbox?.close();
    await dropSchema(schema, POSTGRES);
  });

  const contactPosts = async () =>
    Object.values((await sandbox.control.requests()).by_route['POST /api/v1/partner/contacts'] ?? {}).reduce(
      (a, b) => a + b,
      0,
    );
  const push = async (name: string, csv: string) => {
    const file = join(dir, name);
    await writeFile(file, csv);
    const before = await contactPosts();
    const result = await runCli(['contacts', 'push', file], env);
    return { file, result, posts: (await contactPosts()) - before };
  };

  it('sends every valid contact once and reports each invalid and replaced row by line', {
    timeout: 300_000,
  }, async () => {
    expect(first.invalidLines.length).toBeGreaterThan(300);
    expect(first.replacedLines.length).toBeGreaterThan(100);
    const { file, result, posts } = await push('export-1.csv', first.csv);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(posts).toBe(PEOPLE);
    expect(result.stdout).toContain(
      `read=${first.rows} valid=${PEOPLE} rejected=${first.invalidLines.length} replaced=${first.replacedLines.length} unchanged=0 sent=${PEOPLE} failed=0`,
    );
    const report = (await readFile(`${file}.rejects.csv`, 'utf8')).trim().split('\n').slice(1);
    const byLine = new Map(report.map((l) => [Number.parseInt(l, 10), l]));
    expect(byLine.size).toBe(first.invalidLines.length + first.replacedLines.length);
    for (const line of first.invalidLines)
      expect(byLine.get(line)).toMatch(/^\d+,email,is not an email address,$/);
    for (const line of first.replacedLines)
      expect(byLine.get(line)).toMatch(/,\(row\),replaced by line \d+ \(same key\),crm-\d+$/);

    const truth = new Map(
      (await sandbox.control.truth(sandbox.companyId)).contacts.map((c) => [c.external_id, c]),
    );
    expect(truth.size).toBe(PEOPLE);
    for (const [key, c] of first.contacts) {
      expect({ email: truth.get(key)?.email, name: truth.get(key)?.name }).toEqual(c);
    }
  });

  it('sends exactly the changed contacts of the next export, and nothing when it is pushed again', {
    timeout: 120_000,
  }, async () => {
    expect(next.changedKeys.size).toBeGreaterThan(800);
    const changed = await push('export-2.csv', next.csv);
    expect(changed.result.code).toBe(0);
    expect(changed.posts).toBe(next.changedKeys.size);
    expect(changed.result.stdout).toContain(
      `unchanged=${PEOPLE - next.changedKeys.size} sent=${next.changedKeys.size} failed=0`,
    );
    const truth = new Map(
      (await sandbox.control.truth(sandbox.companyId)).contacts.map((c) => [c.external_id, c]),
    );
    for (const key of next.changedKeys) expect(truth.get(key)?.name).toBe(next.contacts.get(key)?.name);

    const again = await push('export-2-again.csv', next.csv);
    expect(again.result.code).toBe(0);
    expect(again.posts).toBe(0);
    expect(again.result.stdout).toContain(`unchanged=${PEOPLE} sent=0 failed=0`);
  });
});
