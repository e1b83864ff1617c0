import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { detectDelimiter, type ReadItem, type ReadOptions, readRecords } from '../../src/push/readRecords.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rm-read-'));
});

/** Writes `bytes` as a file named `name` and reads it back whole. */
async function read(name: string, bytes: Buffer | string, options: ReadOptions = {}): Promise<ReadItem[]> {
  const path = join(dir, name);
  await writeFile(path, bytes);
  const items: ReadItem[] = [];
  for await (const item of readRecords(path, options)) items.push(item);
  return items;
}

const records = (items: ReadItem[]) => items.flatMap((i) => ('record' in i ? [i.record] : []));
const errors = (items: ReadItem[]) => items.flatMap((i) => ('error' in i ? [i.error] : []));

describe('readRecords: exports as CRMs and Excel write them', () => {
  it('reads UTF-8 with a BOM and CRLF line ends', async () => {
    const items = await read(
      'bom.csv',
      Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from('email,name\r\nana@example.com,Ana\r\nbo@example.com,Bo\r\n'),
      ]),
    );
    expect(records(items)).toEqual([
      { line: 2, fields: { email: 'ana@example.com', name: 'Ana' } },
      { line: 3, fields: { email: 'bo@example.com', name: 'Bo' } },
    ]);
  });

  it('detects a ; or tab delimiter from the header, and takes one given explicitly', async () => {
    expect(records(await read('semi.csv', 'email;name\nana@example.com;Ana, Maria\n'))[0]!.fields).toEqual({
      email: 'ana@example.com',
      name: 'Ana, Maria',
    });
    expect(records(await read('tab.tsv', 'email\tname\nana@example.com\tAna\n'))[0]!.fields.name).toBe('Ana');
    expect(
      records(await read('pipe.csv', 'email|name\na@example.com|A\n', { delimiter: '|' }))[0]!.fields.name,
    ).toBe('A');
    expect(detectDelimiter('"a;b",c,d')).toBe(',');
  });

  it('decodes windows-1252 and keeps accented names exact', async () => {
    const bytes = Buffer.from([
      ...Buffer.from('email;name\nzoe@example.com;Zo'),
      0xeb,
      ...Buffer.from(' M'),
      0xfc,
      ...Buffer.from('ller\n'),
    ]);
    const items = await read('excel.csv', bytes, { encoding: 'windows-1252' });
    expect(records(items)[0]!.fields.name).toBe('Zoë Müller');
  });

  it('reports a byte sequence invalid in UTF-8 as a row error with its line, and reads the rest', async () => {
    const bytes = Buffer.concat([
      Buffer.from('email,name\na@example.com,Ok\nb@example.com,Bad '),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('\nc@example.com,Ok too\n'),
    ]);
    const items = await read('bad-utf8.csv', bytes);
    expect(errors(items)).toEqual([
      { line: 3, field: 'name', reason: 'holds bytes that are not valid utf-8' },
    ]);
    expect(records(items).map((r) => r.line)).toEqual([2, 4]);
  });

  it('reports a field holding U+0000, which PostgreSQL text cannot hold, and reads the rest', async () => {
    const csv = await read('nul.csv', 'email,name\na@example.com,A\u0000B\nb@example.com,Ok\n');
    const nul = 'holds a NUL character (U+0000), which cannot be stored';
    expect(errors(csv)).toEqual([{ line: 2, field: 'name', reason: nul }]);
    expect(records(csv).map((r) => r.line)).toEqual([3]);
    const jsonl = await read(
      'nul.jsonl',
      `${JSON.stringify({ email: 'a@example.com', name: 'A\u0000' })}\n{"email":"b@example.com"}\n`,
    );
    expect(errors(jsonl)).toEqual([{ line: 1, field: 'name', reason: nul }]);
    expect(records(jsonl).map((r) => r.line)).toEqual([2]);
  });

  it('reports half a character escaped in JSON (an emoji cut in two), and reads the rest', async () => {
    const items = await read(
      'cut.jsonl',
      '{"email":"a@example.com","name":"Zoe \\ud83d"}\n{"email":"b@example.com","name":"Ok \\ud83d\\udc4d"}\n',
    );
    expect(errors(items)).toEqual([
      {
        line: 1,
        field: 'name',
        reason: 'holds half of a character (a lone UTF-16 surrogate), which cannot be stored',
      },
    ]);
    expect(records(items)).toEqual([{ line: 2, fields: { email: 'b@example.com', name: 'Ok 👍' } }]);
  });

  it('keeps quoted commas, quotes and newlines in one field, and numbers records by their first line', async () => {
    const items = await read(
      'quoted.csv',
      'email,name\n"a@example.com","Ana ""the boss"", CEO\nsecond line"\nb@example.com,Bo\n',
    );
    expect(records(items)).toEqual([
      { line: 2, fields: { email: 'a@example.com', name: 'Ana "the boss", CEO\nsecond line' } },
      { line: 4, fields: { email: 'b@example.com', name: 'Bo' } },
    ]);
  });

  it('reports a row with too many or too few columns, and reads the others', async () => {
    const items = await read(
      'columns.csv',
      'email,name\na@example.com,A,extra\nb@example.com\nc@example.com,C\n',
    );
    expect(errors(items)).toEqual([
      { line: 2, field: '(row)', reason: 'has 3 columns where the header has 2' },
      { line: 3, field: '(row)', reason: 'has 1 columns where the header has 2' },
    ]);
    expect(records(items).map((r) => r.fields.email)).toEqual(['c@example.com']);
  });

  it('reads JSON Lines, skipping blank lines and reporting a broken one', async () => {
    const items = await read(
      'export.jsonl',
      '{"email":"a@example.com","external_id":42}\n\n{"email": broken\n{"email":"b@example.com"}\n[1]\n',
    );
    expect(records(items)).toEqual([
      { line: 1, fields: { email: 'a@example.com', external_id: '42' } },
      { line: 4, fields: { email: 'b@example.com' } },
    ]);
    expect(errors(items)).toEqual([
      { line: 3, field: '(line)', reason: 'is not valid JSON' },
      { line: 5, field: '(line)', reason: 'is not a JSON object' },
    ]);
  });

  it('numbers records by their first line when a quoted field holds a CRLF, all the way down', async () => {
    const items = await read(
      'crlf-multiline.csv',
      'email,note\r\na@example.com,"two\r\nlines"\r\nb@example.com,"and\r\nthree\r\nlines"\r\nc@example.com,one\r\n',
    );
    expect(records(items).map((r) => r.line)).toEqual([2, 4, 7]);
    expect(records(items)[1]!.fields.note).toBe('and\r\nthree\r\nlines');
  });

  it('keeps a stray quote inside an unquoted field as written, and reads the rows after it', async () => {
    const items = await read('stray.csv', 'email,name\nob@example.com,O"Brien\nzoe@example.com,Zoe\n');
    expect(records(items)).toEqual([
      { line: 2, fields: { email: 'ob@example.com', name: 'O"Brien' } },
      { line: 3, fields: { email: 'zoe@example.com', name: 'Zoe' } },
    ]);
  });

  it('reports a quote never closed with the lines it swallowed, after the rows before it', async () => {
    const items = await read(
      'unclosed.csv',
      'email,name\na@example.com,Ann\nb@example.com,"Bob\nc@example.com,Cy\nd@example.com,Di\n',
    );
    expect(records(items).map((r) => r.fields.name)).toEqual(['Ann']);
    expect(errors(items)).toEqual([
      { line: 3, field: '(row)', reason: 'opens a quote that is never closed: lines 3-5 could not be read' },
    ]);
  });

  it('reports a whole number in JSON Lines too large to read exactly, instead of sending another id', async () => {
    const items = await read(
      'big.jsonl',
      '{"email":"a@example.com","external_id":9007199254740993}\n{"email":"b@example.com","external_id":9007199254740991}\n',
    );
    expect(records(items)).toEqual([
      { line: 2, fields: { email: 'b@example.com', external_id: '9007199254740991' } },
    ]);
    expect(errors(items)).toEqual([
      {
        line: 1,
        field: 'external_id',
        reason: 'is a whole number too large to read exactly: write it as a string',
      },
    ]);
  });

  it('stops reading past 16 MiB of text without a record, naming where, in bounded memory', async () => {
    // An endless record after a quote never closed: were it held whole, this would never end.
    const endless = Readable.from(
      (async function* () {
        yield 'email,name\na@example.com,Ann\nb@example.com,"Bob\n';
        for (;;) yield `${'x'.repeat(1_000)}\n`.repeat(64);
      })(),
    );
    const items: ReadItem[] = [];
    for await (const item of readRecords(endless)) items.push(item);
    expect(records(items).map((r) => r.fields.name)).toEqual(['Ann']);
    const [swallowed, rest] = errors(items);
    expect(swallowed).toMatchObject({ line: 3, field: '(row)' });
    expect(swallowed!.reason).toMatch(/^opens a quote that is never closed: lines 3-\d+ could not be read$/);
    const last = Number(/lines 3-(\d+)/.exec(swallowed!.reason)![1]);
    expect(last).toBeGreaterThan(16_000);
    expect(rest).toEqual({
      line: last + 1,
      field: '(row)',
      reason:
        'was not read, nor anything after it: one record ran past 16 MiB of text (a quote opened and never closed?)',
    });
  });

  it('refuses a header without a column the mapping names, before any row', async () => {
    const requiredColumns = new Map([
      ['E-mail', 'contacts.columns.email'],
      ['CRM ID', 'contacts.columns.external_id'],
    ]);
    await expect(
      read('renamed.csv', 'E-mail,CRM Id\na@example.com,1\n', { requiredColumns }),
    ).rejects.toThrow(
      'the header has no column "CRM ID" (contacts.columns.external_id); its columns: "E-mail", "CRM Id"',
    );
    // JSON Lines objects leave out what they have no value for: not checked.
    expect(
      records(await read('renamed.jsonl', '{"E-mail":"a@example.com"}\n', { requiredColumns })),
    ).toHaveLength(1);
  });

  it('refuses a header that names a column twice, before any row', async () => {
    await expect(
      read('dup-header.csv', 'email,name,email\na@example.com,Ann,b@example.com\n'),
    ).rejects.toThrow('the header names column "email" twice (columns 1 and 3): rename one');
  });
});
