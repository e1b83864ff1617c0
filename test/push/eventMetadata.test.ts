import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { enqueueEventsFile } from '../../src/push/events/enqueueFile.js';
import { eventFromRecord, toNewEvent } from '../../src/push/events/eventInput.js';
import { firstHiddenByParse } from '../../src/push/jsonText.js';

const alteredByParse = (text: string) => firstHiddenByParse(text, 'metadata');

import { unsendableReason } from '../../src/push/events/metadataSize.js';
import { OutboxSender } from '../../src/push/events/outboxSender.js';
import { enqueueEvents } from '../../src/push/events/outboxSql.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';
import { newEvent } from './helpers.js';

const TOO_LARGE = 'a number too large to be carried (it would be sent as null): write it as a string';
const PAST_2_53 = 'is a whole number past 2^53, which is not carried exactly: write it as a string';

describe('firstHiddenByParse: what JSON.parse would change in metadata, by key', () => {
  it.each([
    ['{"n": 1e400}', `metadata.n is 1e400, ${TOO_LARGE}`],
    ['{"n": -1E+400}', `metadata.n is -1E+400, ${TOO_LARGE}`],
    [
      '{"n": 1e-400}',
      'metadata.n is 1e-400, a number too small to be carried (it would be sent as 0): write it as a string',
    ],
    ['{"id": 12345678901234567890}', `metadata.id ${PAST_2_53}`],
    ['{"id": 9007199254740993}', `metadata.id ${PAST_2_53}`],
    [
      '{"x": 0.1000000000000000000001}',
      'metadata.x is 0.1000000000000000000001, a number with more digits than can be carried (it would be sent as 0.1): write it as a string',
    ],
    ['{"a": {"b": [1, 2.5, 1e400]}}', `metadata.a.b[2] is 1e400, ${TOO_LARGE}`],
    ['{"order id": 1e400}', `metadata["order id"] is 1e400, ${TOO_LARGE}`],
    ['{"s": "a \\" 1e400 ,{[", "k\\"": {"n": 1e999}}', `metadata["k\\""].n is 1e999, ${TOO_LARGE}`],
    // PostgreSQL prints a jsonb 1e400 as its 401 digits: shown cut.
    [`{"n": 1${'0'.repeat(400)}}`, `metadata.n is 100000000000000000000000… (401 characters), ${TOO_LARGE}`],
    [`{"n": 1${'0'.repeat(300)}}`, `metadata.n ${PAST_2_53}`],
    [
      `{"n": 1${'0'.repeat(400)}.5}`,
      `metadata.n is 100000000000000000000000… (403 characters), ${TOO_LARGE}`,
    ],
    [
      '{"a": 1, "b": {"c": 1, "c": 2}}',
      'metadata.b holds the key "c" twice, and only its last value would be kept: give each key once',
    ],
  ])('%s: %s', (text, reason) => {
    expect(alteredByParse(text)).toBe(reason);
  });

  it('takes a number written otherwise but worth the same, strings that look like numbers, and keys repeated in other objects', () => {
    const text =
      '{"a": 1.50, "b": 1E2, "c": -0, "d": 0.1, "e": 1.5e-7, "f": 0.00000015, "g": 9007199254740991, "h": -9007199254740991, "i": "1e400", "j": [true, null, false, {"x": 1}, {"x": 2}], "k": 123456789.123456, "l": 5e-324}';
    expect(alteredByParse(text)).toBeUndefined();
    expect(alteredByParse('{}')).toBeUndefined();
  });

  it('scans a long value nested deep in one pass: the path is built only for a reason', () => {
    const long = `${'{"a": '.repeat(50)}[${'1.5, 0.25, '.repeat(100_000)}1e400]${'}'.repeat(50)}`;
    expect(alteredByParse(long)).toMatch(/^metadata(\.a){50}\[200000\] is 1e400, a number too large/);
  });

  it('answers for a value nested thousands deep without overflowing the stack: too deep, first', () => {
    const deep = `${'{"a": '.repeat(5_000)}1e400${'}'.repeat(5_000)}`;
    expect(alteredByParse(deep)).toBe('metadata.a is nested more than 100 levels deep');
  });
});

describe('unsendableReason: a value JSON has no form for', () => {
  it.each([
    [
      { n: Number.POSITIVE_INFINITY },
      'metadata.n is Infinity, a number JSON has no form for (it would be sent as null)',
    ],
    [{ a: [Number.NaN] }, 'metadata.a[0] is NaN, a number JSON has no form for (it would be sent as null)'],
    [
      { 'x y': Number.NEGATIVE_INFINITY },
      'metadata["x y"] is -Infinity, a number JSON has no form for (it would be sent as null)',
    ],
  ])('%o', (metadata, reason) => {
    expect(unsendableReason(metadata)).toBe(reason);
  });
});

describe('an events file or the CLI: the row refused, naming the key', () => {
  const record = (metadata: string, line = 4) => ({
    line,
    fields: { event_id: 'e1', email: 'a@example.com', event_type: 'matter.closed', metadata },
  });

  it('refuses a number parsing would alter, and takes the same row with it written as a string', () => {
    expect(eventFromRecord(record('{"matter": 7, "score": 1e400}'))).toEqual({
      line: 4,
      field: 'metadata',
      reason: `metadata.score is 1e400, ${TOO_LARGE}`,
    });
    expect(eventFromRecord(record('{"id": 12345678901234567890}', 9))).toEqual({
      line: 9,
      field: 'metadata',
      reason: `metadata.id ${PAST_2_53}`,
    });
    expect(eventFromRecord(record('{"matter": 7, "score": "1e400"}'))).toMatchObject({
      key: 'e1',
      metadata: { matter: 7, score: '1e400' },
    });
  });

  it('still says "must be a JSON object" of an array, whatever it holds', () => {
    expect(eventFromRecord(record('[1e400]'))).toEqual({
      line: 4,
      field: 'metadata',
      reason: 'must be a JSON object',
    });
  });

  it('says that metadata that is not JSON at all is not valid JSON, rather than not an object', () => {
    expect(eventFromRecord(record('{"matter": 7'))).toEqual({
      line: 4,
      field: 'metadata',
      reason: 'is not valid JSON',
    });
    expect(
      toNewEvent({ email: 'a@example.com', event_type: 'matter.closed', metadata: 'matter 7' }, 'cli'),
    ).toEqual({ field: 'metadata', reason: 'is not valid JSON' });
  });

  it('names a bad key by its column, event_id, not by the internal field "key"', () => {
    expect(
      eventFromRecord({
        line: 2,
        fields: { event_id: 'k'.repeat(501), email: 'a@example.com', event_type: 'matter.closed' },
      }),
    ).toEqual({ line: 2, field: 'event_id', reason: 'must be at most 500 characters' });
  });

  it('refuses it from the CLI too', () => {
    expect(
      toNewEvent({ email: 'a@example.com', event_type: 'matter.closed', metadata: '{"n": -1e400}' }, 'cli'),
    ).toEqual({ field: 'metadata', reason: `metadata.n is -1e400, ${TOO_LARGE}` });
  });
});

describe('metadata on the wire: from a file and from enqueue_event', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let dir: string;
  const apis: PartnerApi[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 57 });
    db = await freshDb();
    dir = await mkdtemp(join(tmpdir(), 'rm-event-metadata-'));
  });
  afterAll(async () => {
    for (const api of apis) await api.close();
    await db?.close();
    await sandbox?.close();
  });

  const sender = () => {
    const api = testApi(
      { url: sandbox.url, apiKey: sandbox.apiKey },
      { retry: { maxRetries: 0, budgetMs: 0, baseDelayMs: 5, maxDelayMs: 50 } },
    );
    apis.push(api);
    return new OutboxSender(
      { db, api, log: quietLog, scrubber: new SecretScrubber() },
      {
        worker: 'metadata',
        concurrency: 2,
        ratePerSecond: 100,
        leaseMs: 30_000,
        policy: { unknownOutcome: 'retry', maxAttempts: 5, baseDelayMs: 1, maxDelayMs: 1 },
      },
    );
  };
  const received = async (prefix: string) =>
    (await sandbox.control.truth(sandbox.companyId)).events.filter((e) =>
      String(e.metadata?.k ?? '').startsWith(prefix),
    );
  const rowOf = (key: string) =>
    db
      .knex(db.table('events_outbox'))
      .where({ idempotency_key: key })
      .first('state', 'last_error', db.knex.raw('metadata::text as metadata'));

  it('a file: each altered row reported with its line and key, the others enqueued and sent exactly', async () => {
    const file = join(dir, 'events.csv');
    const rows = [
      'event_id,email,event_type,metadata',
      'f-ok,ok@example.com,matter.closed,"{""k"": ""f-ok"", ""x"": 1.50, ""y"": 1E2, ""big"": ""12345678901234567890""}"',
      'f-inf,inf@example.com,matter.closed,"{""k"": ""f-inf"", ""score"": 1e400}"',
      'f-id,id@example.com,matter.closed,"{""k"": ""f-id"", ""crm"": {""id"": 12345678901234567890}}"',
      'f-digits,digits@example.com,matter.closed,"{""k"": ""f-digits"", ""x"": 0.1000000000000000000001}"',
      'f-tiny,tiny@example.com,matter.closed,"{""k"": ""f-tiny"", ""x"": 1e-400}"',
      'f-twice,twice@example.com,matter.closed,"{""k"": ""f-twice"", ""x"": 1, ""x"": 2}"',
      'f-ok2,ok2@example.com,matter.closed,"{""k"": ""f-ok2""}"',
    ];
    await writeFile(file, `${rows.join('\n')}\n`);
    const summary = await enqueueEventsFile(db, file);
    expect(summary).toMatchObject({ read: 7, enqueued: 2, rejected: 5 });
    const report = (await readFile(summary.reportPath, 'utf8')).trim().split('\n').slice(1);
    expect(report).toEqual([
      `3,metadata,"metadata.score is 1e400, ${TOO_LARGE}",`,
      `4,metadata,"metadata.crm.id ${PAST_2_53}",`,
      '5,metadata,"metadata.x is 0.1000000000000000000001, a number with more digits than can be carried (it would be sent as 0.1): write it as a string",',
      '6,metadata,"metadata.x is 1e-400, a number too small to be carried (it would be sent as 0): write it as a string",',
      '7,metadata,"metadata holds the key ""x"" twice, and only its last value would be kept: give each key once",',
    ]);
    expect(await sender().drain()).toMatchObject({ sent: 2, failed: 0 });
    const sent = await received('f-');
    expect(sent.map((e) => e.metadata).sort((a, b) => String(a?.k).localeCompare(String(b?.k)))).toEqual([
      { k: 'f-ok', x: 1.5, y: 100, big: '12345678901234567890' },
      { k: 'f-ok2' },
    ]);
  });

  it("enqueue_event refuses a number JSON.parse would alter, at once, in the caller's transaction; takes one worth the same", async () => {
    const enqueue = (key: string, metadata: string) =>
      db.knex
        .raw('select ??(?, ?, ?, ?::jsonb) as enqueued', [
          `${db.schema}.enqueue_event`,
          `${key}@example.com`,
          'matter.closed',
          key,
          metadata,
        ])
        .then(
          (r: { rows: Array<{ enqueued: boolean }> }) => r.rows[0]?.enqueued,
          (error: unknown) => String(error),
        );
    const refused = (key: string, what: string) =>
      expect.stringContaining(
        `enqueue_event: metadata of key ${key} holds the number ${what}: write it as a string`,
      );
    expect(await enqueue('q-inf', '{"score": 1e400}')).toEqual(
      refused(
        'q-inf',
        '1000000000000000000000000000000000000000… is too large for a JSON reader (it would be sent as null)',
      ),
    );
    expect(await enqueue('q-id', '{"crm": [1, {"id": 12345678901234567890}]}')).toEqual(
      refused('q-id', '12345678901234567890 is a whole number past 2^53, which is not carried exactly'),
    );
    expect(await enqueue('q-digits', '{"x": 0.1000000000000000000001}')).toEqual(
      refused(
        'q-digits',
        '0.1000000000000000000001 has more digits than a JSON reader carries (it would be sent as 0.1)',
      ),
    );
    expect(await enqueue('q-tiny', '{"x": 1e-400}')).toEqual(
      refused('q-tiny', `0.${'0'.repeat(38)}… is too small for a JSON reader (it would be sent as 0)`),
    );
    expect(
      await enqueue(
        'q-ok',
        '{"x": 1.50, "y": 1e2, "z": -0, "w": 1.5e-7, "v": 9007199254740991, "u": 0.30000000000000004}',
      ),
    ).toBe(true);
    // Whatever the caller's session prints floats with: the function sets its own.
    await db.knex.transaction(async (trx) => {
      if (db.backend === 'postgres') await trx.raw('set local extra_float_digits = 0');
      const r = await trx.raw('select ??(?, ?, ?, ?::jsonb) as enqueued', [
        `${db.schema}.enqueue_event`,
        'q-session@example.com',
        'matter.closed',
        'q-session',
        '{"u": 0.30000000000000004}',
      ]);
      expect(r.rows[0].enqueued).toBe(true);
    });
    // Not sent by the next test's drain.
    await db.knex(db.table('events_outbox')).where('idempotency_key', 'like', 'q-%').del();
  });

  it('a jsonb number JSON.parse would alter in a row written without enqueue_event is refused at its turn with its reason, never sent altered; the others are sent', async () => {
    // As a partner's own INSERT writes it, skipping enqueue_event's checks.
    const enqueue = (key: string, metadata: string) =>
      db.knex(db.table('events_outbox')).insert({
        idempotency_key: key,
        email: `${key}@example.com`,
        event_type: 'matter.closed',
        metadata: db.knex.raw('?::jsonb', [metadata]),
        source: 'sql',
      });
    await enqueue('s-inf', '{"k": "s-inf", "score": 1e400}');
    await enqueue('s-neg', '{"k": "s-neg", "score": -1e400}');
    await enqueue('s-id', '{"k": "s-id", "crm": [12345678901234567890]}');
    await enqueue('s-digits', '{"k": "s-digits", "x": 0.1000000000000000000001}');
    await enqueue('s-tiny', '{"k": "s-tiny", "x": 1e-400}');
    await enqueue('s-ok', '{"k": "s-ok", "x": 1.50, "y": 1e2, "z": 1.5e-7}');
    // One this program wrote (enqueueEvents): sent as before.
    await enqueueEvents(db.knex, db, [newEvent('s-code', { metadata: { k: 's-code', n: 1 } })]);
    expect(await sender().drain()).toMatchObject({ sent: 2, failed: 5, retried: 0 });

    expect(await rowOf('s-inf')).toMatchObject({
      state: 'failed',
      last_error: `not sent: metadata.score is 100000000000000000000000… (401 characters), ${TOO_LARGE}`,
    });
    expect((await rowOf('s-neg'))?.last_error).toBe(
      `not sent: metadata.score is -10000000000000000000000… (402 characters), ${TOO_LARGE}`,
    );
    expect(await rowOf('s-id')).toMatchObject({
      state: 'failed',
      last_error: `not sent: metadata.crm[0] ${PAST_2_53}`,
    });
    expect((await rowOf('s-digits'))?.last_error).toBe(
      'not sent: metadata.x is 0.1000000000000000000001, a number with more digits than can be carried (it would be sent as 0.1): write it as a string',
    );
    expect((await rowOf('s-tiny'))?.last_error).toMatch(
      /^not sent: metadata\.x is 0\.0{22}… \(402 characters\), a number too small to be carried \(it would be sent as 0\)/,
    );
    // The row keeps the value as written, for an operator to fix and retry.
    expect((await rowOf('s-inf'))?.metadata).toContain(`1${'0'.repeat(400)}`);
    expect(await rowOf('s-ok')).toMatchObject({ state: 'sent', last_error: null });

    const sent = await received('s-');
    expect(sent.map((e) => e.metadata?.k).sort()).toEqual(['s-code', 's-ok']);
    expect(sent.find((e) => e.metadata?.k === 's-ok')?.metadata).toEqual({
      k: 's-ok',
      x: 1.5,
      y: 100,
      z: 1.5e-7,
    });
  });
});
