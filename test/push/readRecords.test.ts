import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { TOO_DEEP } from '../../src/db/storableText.js';
import {
  detectDelimiter,
  type ReadItem,
  type ReadOptions,
  RecordFileError,
  readRecords,
} from '../../src/push/readRecords.js';

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

/** Reads a stream whole into `items`: what was yielded before a file fault stays there. */
async function readAll(
  source: Readable,
  items: ReadItem[] = [],
  options: ReadOptions = {},
): Promise<ReadItem[]> {
  for await (const item of readRecords(source, options)) items.push(item);
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

  it('fails an empty file as a file, and reads a header-only one as one with no records', async () => {
    await expect(read('empty.csv', '')).rejects.toThrow(
      new RecordFileError('empty file (0 bytes, not even a header line): did the export fail?'),
    );
    await expect(read('empty.jsonl', '')).rejects.toBeInstanceOf(RecordFileError);
    expect(await read('header.csv', 'email,name\n')).toEqual([]);
  });

  it.each([
    ['a byte order mark alone', Buffer.from([0xef, 0xbb, 0xbf])],
    ['a line break alone', Buffer.from('\r\n')],
    ['blank lines', Buffer.from('\n\r\n\r')],
  ])(
    'fails a CSV with no header line (%s) as it fails an empty file, not as an export with no rows',
    async (_, bytes) => {
      // Excel saves an empty sheet as "CSV UTF-8" as its byte order mark alone.
      await expect(read('no-header.csv', bytes)).rejects.toThrow(
        new RecordFileError(
          'no header line (the file holds only blank lines or a byte order mark): did the export fail?',
        ),
      );
    },
  );

  it.each([
    ['a byte order mark alone', Buffer.from([0xef, 0xbb, 0xbf])],
    ['blank lines', Buffer.from('\n \r\n\t\n')],
  ])('fails a JSON Lines file with no line of JSON (%s) as it fails an empty file', async (_, bytes) => {
    await expect(read('no-line.jsonl', bytes)).rejects.toThrow(
      new RecordFileError(
        'no line of JSON (the file holds only blank lines or a byte order mark): did the export fail?',
      ),
    );
    // One line refused is a file read: its error is the row's.
    expect(await read('one-bad.jsonl', '\nnot json\n')).toEqual([
      expect.objectContaining({ error: expect.objectContaining({ line: 2 }) }),
    ]);
  });

  it('fails with the error of a file it cannot read, instead of waiting for ever', async () => {
    const notAFile = join(dir, 'a-directory.csv');
    await mkdir(notAFile);
    const readWhole = async () => {
      for await (const _ of readRecords(notAFile)) {
        // nothing to read
      }
    };
    await expect(readWhole()).rejects.toThrow(/EISDIR/);
  });

  it('fails with the error of a file that fails partway (EIO after the header), CSV or JSON Lines, and closes it', async () => {
    // A network mount failing after the first chunk: an 'error' nobody listened to ended the process.
    const failingPartway = (first: string) => {
      let reads = 0;
      return new Readable({
        read() {
          reads++;
          if (reads === 1) this.push(first);
          else if (reads === 2) {
            setTimeout(
              () => this.destroy(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' })),
              20,
            );
          }
        },
      });
    };
    for (const [format, first] of [
      ['csv', 'email,name\na@example.com,Ann\n'],
      ['jsonl', '{"email":"a@example.com"}\n'],
    ] as const) {
      const source = failingPartway(first);
      await expect(readAll(source, [], { format })).rejects.toMatchObject({ code: 'EIO' });
      expect(source.destroyed).toBe(true);
    }
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

  it('detects the delimiter from the header line after blank lines, which the parser skips', async () => {
    expect(await read('blank-first.csv', '\r\nemail;name\r\nana@example.com;Smith, Ana\r\n')).toEqual([
      { record: { line: 3, fields: { email: 'ana@example.com', name: 'Smith, Ana' } } },
    ]);
    // The header line in a later chunk than the blank lines, and cut between two.
    const chunks = ['\r\n\n', '\r', 'email;na', 'me\r\nana@example.com;Smith, Ana\r\n'];
    expect(await readAll(Readable.from(chunks))).toEqual([
      { record: { line: 5, fields: { email: 'ana@example.com', name: 'Smith, Ana' } } },
    ]);
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

  it('fails the file at a quote never closed, naming the lines it swallowed, after the rows before it', async () => {
    const items: ReadItem[] = [];
    const reading = (async () => {
      for await (const item of readRecords(
        Readable.from([
          'email,name\na@example.com,Ann\nb@example.com,"Bob\nc@example.com,Cy\nd@example.com,Di\n',
        ]),
      )) {
        items.push(item);
      }
    })();
    await expect(reading).rejects.toThrow(
      new RecordFileError(
        'line 3: opens a quote that is never closed (lines 3-5, to the end of the file); the file was not read past line 2, and fails as a whole',
      ),
    );
    expect(records(items).map((r) => r.fields.name)).toEqual(['Ann']);
    expect(errors(items)).toEqual([]);
  });

  it('names the lines a quote never closed swallowed as they are with CRLF line ends', async () => {
    const crlf =
      'email,name\r\na@example.com,Ann\r\nb@example.com,"Bob\r\nc@example.com,Cy\r\nd@example.com,Di\r\n';
    await expect(read('unclosed-crlf.csv', crlf)).rejects.toThrow(
      'line 3: opens a quote that is never closed (lines 3-5, to the end of the file)',
    );
    // Without a line break at the end, and with a CR split from its LF by the chunking.
    const chunks = ['email,name\r', '\na@example.com,"Ann\r', '\nb\r\nc'];
    await expect(readAll(Readable.from(chunks))).rejects.toThrow('(lines 2-4, to the end of the file)');
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
        reason: 'is a whole number past 2^53, which is not carried exactly: write it as a string',
      },
    ]);
  });

  it('reports a number in JSON Lines that JSON.parse would alter, however deep, naming where', async () => {
    const items = await read(
      'numbers.jsonl',
      [
        '{"email":"a@example.com","metadata":{"score":1e400}}',
        '{"email":"b@example.com","metadata":{"a":[1,0.1000000000000000000001]}}',
        '{"email":"c@example.com","metadata":{"score":1.50,"n":-0}}',
      ].join('\n'),
    );
    expect(errors(items)).toEqual([
      {
        line: 1,
        field: 'metadata',
        reason:
          'metadata.score is 1e400, a number too large to be carried (it would be sent as null): write it as a string',
      },
      {
        line: 2,
        field: 'metadata',
        reason:
          'metadata.a[1] is 0.1000000000000000000001, a number with more digits than can be carried (it would be sent as 0.1): write it as a string',
      },
    ]);
    // Worth the same as written: taken.
    expect(records(items)).toEqual([
      { line: 3, fields: { email: 'c@example.com', metadata: '{"score":1.5,"n":0}' } },
    ]);
  });

  it('fails the file past 16 MiB of text without a record, naming where and why, in bounded memory', async () => {
    // A quote never closed in a large export: 40 MiB swallowed, never held whole.
    const swallowed = (async function* () {
      yield 'email,name\na@example.com,Ann\nb@example.com,"Bob\n';
      for (let i = 0; i < 640; i++) yield `${'x'.repeat(1_000)}\n`.repeat(64);
    })();
    const items: ReadItem[] = [];
    await expect(readAll(Readable.from(swallowed), items)).rejects.toThrow(
      new RecordFileError(
        'line 3: opens a quote that is never closed (lines 3-40963, to the end of the file); the file was not read past line 2, and fails as a whole',
      ),
    );
    expect(records(items).map((r) => r.fields.name)).toEqual(['Ann']);
    expect(errors(items)).toEqual([]);
  });

  it('fails the file at a quoted field over 16 MiB, saying so rather than that its quote is never closed', async () => {
    const items: ReadItem[] = [];
    const big = `email,name\na@example.com,Ann\nb@example.com,"${'x'.repeat(17 * 2 ** 20)}"\nc@example.com,Cy\nd@example.com,Di\ne@example.com,Ed\n`;
    await writeFile(join(dir, 'big-field.csv'), big);
    await expect(readAll(createReadStream(join(dir, 'big-field.csv')), items)).rejects.toThrow(
      new RecordFileError(
        'line 3: a quoted field runs past 16 MiB, the most one record may hold; the file was not read past line 2, and fails as a whole',
      ),
    );
    expect(records(items).map((r) => r.fields.name)).toEqual(['Ann']);
    // Unquoted, by chunks: as much a record that cannot be held.
    const unquoted = (async function* () {
      yield 'email,name\na@example.com,Ann\nb@example.com,';
      for (let i = 0; i < 20; i++) yield 'x'.repeat(2 ** 20);
      yield '\nc@example.com,Cy\n';
    })();
    await expect(readAll(Readable.from(unquoted))).rejects.toThrow(
      'line 3: the record runs past 16 MiB, the most one record may hold; the file was not read past line 2',
    );
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

  it('refuses a header without any column of a set it needs one of, naming them, and names every missing column', async () => {
    const requiredOneOf = [{ columns: ['email', 'contact_id'], for: "the event's recipient" }];
    await expect(read('no-recipient.csv', 'event_id,phone\ne1,555\n', { requiredOneOf })).rejects.toThrow(
      new RecordFileError(
        `the header has no column "email" or "contact_id" (the event's recipient); its columns: "event_id", "phone"`,
      ),
    );
    expect(
      records(await read('recipient.csv', 'event_id,contact_id\ne1,c1\n', { requiredOneOf })),
    ).toHaveLength(1);
    const requiredColumns = new Map([
      ['event_id', 'the key'],
      ['event_type', 'the type'],
    ]);
    await expect(read('no-key.csv', 'email\na@example.com\n', { requiredColumns })).rejects.toThrow(
      'the header has no columns "event_id" (the key), "event_type" (the type); its columns: "email"',
    );
  });

  it('refuses a header that names a column twice, before any row', async () => {
    await expect(
      read('dup-header.csv', 'email,name,email\na@example.com,Ann,b@example.com\n'),
    ).rejects.toThrow('the header names column "email" twice (columns 1 and 3): rename one');
  });

  it('reads a header that names twice a column never read, taking neither of its values, and refuses one read', async () => {
    // CRMs export two Phone or Address columns; a contacts push sends neither.
    const columnsRead = new Set(['email', 'name']);
    const csv = 'email,Phone,name,Phone\nana@example.com,111,Ana,222\n';
    expect(await read('dup-unread.csv', csv, { columnsRead })).toEqual([
      { record: { line: 2, fields: { email: 'ana@example.com', name: 'Ana' } } },
    ]);
    await expect(read('dup-read.csv', csv, { columnsRead: new Set(['email', 'Phone']) })).rejects.toThrow(
      new RecordFileError('the header names column "Phone" twice (columns 2 and 4): rename one'),
    );
  });
});

describe('readRecords: a bad record costs that record, a file not read to its end fails', () => {
  it('checks only the columns read: a NUL or invalid bytes in a column never sent rejects nothing', async () => {
    const columnsRead = new Set(['email', 'name']);
    const csv = Buffer.concat([
      Buffer.from('email,name,notes\na@example.com,Ann,nul \u0000 here\nb@example.com,Bo,bad '),
      Buffer.from([0xff]),
      Buffer.from('\nc@example.com,Cy\u0000,ok\n'),
    ]);
    const items = await read('notes.csv', csv, { columnsRead });
    expect(records(items)).toEqual([
      { line: 2, fields: { email: 'a@example.com', name: 'Ann' } },
      { line: 3, fields: { email: 'b@example.com', name: 'Bo' } },
    ]);
    expect(errors(items)).toEqual([
      { line: 4, field: 'name', reason: 'holds a NUL character (U+0000), which cannot be stored' },
    ]);
    const jsonl =
      '{"email":"a@example.com","notes":"\\u0000","extra":[[[1]]]}\n{"email":"b@example.com\\u0000"}\n';
    expect(await read('notes.jsonl', jsonl, { columnsRead })).toEqual([
      { record: { line: 1, fields: { email: 'a@example.com' } } },
      {
        error: { line: 2, field: 'email', reason: 'holds a NUL character (U+0000), which cannot be stored' },
      },
    ]);
    // Without columnsRead, every column is read, and checked.
    expect(errors(await read('notes-all.csv', csv)).map((e) => [e.line, e.field])).toEqual([
      [2, 'notes'],
      [3, 'notes'],
      [4, 'name'],
    ]);
  });

  it('rejects a JSON value nested too deep as one record, naming its line and field, and reads the rest', async () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    const jsonl = [
      `{"email":"a@example.com","x":${deep(5_000)}}`,
      `{"email":"b@example.com","x":${deep(100)}}`,
      `{"email":"c@example.com","x":{"y":${deep(100)}}}`,
      '{"email":"d@example.com"}',
    ].join('\n');
    const items = await read('deep.jsonl', jsonl);
    expect(errors(items)).toEqual([
      { line: 1, field: 'x', reason: TOO_DEEP },
      { line: 3, field: 'x', reason: TOO_DEEP },
    ]);
    expect(TOO_DEEP).toBe('is nested more than 100 levels deep');
    expect(records(items).map((r) => r.line)).toEqual([2, 4]);
    // A column not read is not looked into at all.
    const unread = await read('deep-unread.jsonl', jsonl, { columnsRead: new Set(['email']) });
    expect(records(unread).map((r) => r.line)).toEqual([1, 2, 3, 4]);
  });

  it('rejects a JSON Lines object giving a key twice, naming its line and the key, and reads the rest', async () => {
    const jsonl = [
      '{"email":"right@example.com","email":"wrong@example.com"}',
      '{"email":"a@example.com","name":"A","\\u006eame":"B"}',
      '{"email":"b@example.com","meta":{"k":1,"k" :2}}',
      '{"email":"c@example.com","meta":[{"k":1},{"k":2}],"s":"\\"email\\":1, \\"email\\":"}',
    ].join('\r\n');
    const items = await read('dup.jsonl', jsonl);
    const twice = 'is given twice in the object: which of its values to take is ambiguous';
    expect(errors(items)).toEqual([
      { line: 1, field: 'email', reason: twice },
      { line: 2, field: 'name', reason: twice },
      {
        line: 3,
        field: 'meta',
        reason: 'holds the key "k" twice, and only its last value would be kept: give each key once',
      },
    ]);
    expect(records(items).map((r) => r.line)).toEqual([4]);
  });

  it('keeps a JSON Lines key or CSV column named __proto__ as a column, and reads no column a record lacks from Object.prototype', async () => {
    const jsonl = [
      '{"email":"a@example.com","__proto__":"vip"}',
      '{"email":"b@example.com","__proto__":{"tier":2}}',
      '{"email":"c@example.com","__proto__":"a\\u0000b"}',
    ].join('\n');
    const items = await read('proto.jsonl', jsonl);
    // Assigned to a plain object, the key set its prototype (a string was ignored): it was gone,
    // and its value never checked.
    expect(records(items).map((r) => [r.line, Object.entries(r.fields)])).toEqual([
      [
        1,
        [
          ['email', 'a@example.com'],
          ['__proto__', 'vip'],
        ],
      ],
      [
        2,
        [
          ['email', 'b@example.com'],
          ['__proto__', '{"tier":2}'],
        ],
      ],
    ]);
    const nul = 'holds a NUL character (U+0000), which cannot be stored';
    expect(errors(items)).toEqual([{ line: 3, field: '__proto__', reason: nul }]);
    const csv = records(await read('proto.csv', 'email,__proto__\na@example.com,vip\n'));
    expect(csv.map((r) => Object.entries(r.fields))).toEqual([
      [
        ['email', 'a@example.com'],
        ['__proto__', 'vip'],
      ],
    ]);
    // A column like any other, read by its name (a variable: linters take `.__proto__` for the accessor).
    const column = '__proto__';
    const onlyIt = await read('read.jsonl', jsonl, { columnsRead: new Set([column]) });
    expect(records(onlyIt).map((r) => r.fields[column])).toEqual(['vip', '{"tier":2}']);
    // A column the record lacks is undefined, whatever its name: never a function of Object.prototype.
    for (const { fields } of [...records(items), ...csv]) {
      for (const name of ['constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
        expect(fields[name], name).toBeUndefined();
      }
    }
  });

  it('reads a JSON Lines line however it is cut into chunks, and fails the file at one over 16 MiB', async () => {
    const chunks = ['{"email":"a@', 'example.com"', ',"name":"A"}\r', '\n\n{"email"', ':"b@example.com"}'];
    expect(records(await readAll(Readable.from(chunks), [], { format: 'jsonl' }))).toEqual([
      { line: 1, fields: { email: 'a@example.com', name: 'A' } },
      { line: 3, fields: { email: 'b@example.com' } },
    ]);
    const long = (async function* () {
      yield '{"email":"a@example.com"}\n{"email":"b@example.com","name":"';
      for (;;) yield 'x'.repeat(2 ** 20);
    })();
    const items: ReadItem[] = [];
    await expect(readAll(Readable.from(long), items, { format: 'jsonl' })).rejects.toThrow(
      new RecordFileError(
        'line 2: the line runs past 16 MiB, the most one record may hold; the file was not read past line 1, and fails as a whole',
      ),
    );
    expect(records(items).map((r) => r.line)).toEqual([1]);
  });

  it('refuses a UTF-16 or UTF-32 file by its byte order mark, naming the encodings read', async () => {
    const text = 'email,name\na@example.com,Ann\n';
    const utf16be = Buffer.from(text, 'utf16le').swap16();
    const files: Array<[Buffer, string]> = [
      [Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]), 'UTF-16 (little-endian)'],
      [Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be]), 'UTF-16 (big-endian)'],
      [Buffer.from([0xff, 0xfe, 0, 0, 0x65, 0, 0, 0]), 'UTF-32 (little-endian)'],
      [Buffer.from([0, 0, 0xfe, 0xff]), 'UTF-32 (big-endian)'],
    ];
    for (const [bytes, encoding] of files) {
      for (const name of ['utf16.csv', 'utf16.jsonl']) {
        await expect(read(name, bytes)).rejects.toThrow(
          new RecordFileError(
            `the file is ${encoding}, by the byte order mark it starts with, and only utf-8, windows-1252, latin1 are read (--encoding): save it as UTF-8`,
          ),
        );
      }
    }
    // A file shorter than a byte order mark is read as ever.
    expect(await read('tiny.csv', 'e\n')).toEqual([]);
  });

  it('refuses a UTF-8 file by its byte order mark when read as windows-1252 or latin1, naming the setting', async () => {
    // Read as windows-1252, the mark became `ï»¿` in the first column's name: that column went unread.
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const files: Array<[string, Buffer]> = [
      [
        'excel-utf8.csv',
        Buffer.concat([bom, Buffer.from('external_id,email,name\nCRM-1,zoe@example.com,Zoë\n')]),
      ],
      ['excel-utf8.jsonl', Buffer.concat([bom, Buffer.from('{"external_id":"CRM-1"}\n')])],
      ['bom-alone.csv', bom],
    ];
    for (const encoding of ['windows-1252', 'latin1'] as const) {
      for (const [name, bytes] of files) {
        await expect(read(name, bytes, { encoding })).rejects.toThrow(
          new RecordFileError(
            `the file is UTF-8, by the byte order mark it starts with, but is read as ${encoding} (--encoding / CRM_INBOX_ENCODING): read it as utf-8, or save it as ${encoding}`,
          ),
        );
      }
    }
    expect(records(await read('excel-utf8.csv', files[0]![1]))).toEqual([
      { line: 2, fields: { external_id: 'CRM-1', email: 'zoe@example.com', name: 'Zoë' } },
    ]);
  });
});

/**
 * A last line ended by a CR alone, in a file of CRLF (or LF) lines: csv-parse kept the CR in the
 * last field and did not count it, so the last record took the line number of the one before it.
 */
describe('a CSV whose last line ends with a CR alone', () => {
  const linesOf = (items: ReadItem[]) => items.map((i) => ('record' in i ? i.record.line : i.error.line));

  it.each([
    ['CRLF', '\r\n'],
    ['LF', '\n'],
  ])('numbers the last record by its own line, in a file of %s lines', async (_, eol) => {
    const text = ['email,name', 'a@example.com,Ann', 'b@example.com,"Bo', 'b"', 'c@example.com,Cy'].join(eol);
    const items = await readAll(Readable.from([`${text}\r`]));
    expect(linesOf(items)).toEqual([2, 3, 5]);
    // The CR ends the line, as any line end does in a file of mixed ends (below).
    expect(records(items)[2]!.fields).toEqual({ email: 'c@example.com', name: 'Cy' });
  });

  it('does so with the CR in a chunk of its own, and with one record only', async () => {
    const items = await readAll(Readable.from(['email\r\na@example.com\r\nb@example.com', '\r']));
    expect(linesOf(items)).toEqual([2, 3]);
    expect(records(await readAll(Readable.from(['email\r\na@example.com\r'])))).toEqual([
      { line: 2, fields: { email: 'a@example.com' } },
    ]);
  });

  it('leaves a file of CR lines as it was: no line added', async () => {
    const items = await readAll(Readable.from(['email,name\ra@example.com,Ann\rb@example.com,Bo\r']));
    expect(items).toEqual([
      { record: { line: 2, fields: { email: 'a@example.com', name: 'Ann' } } },
      { record: { line: 3, fields: { email: 'b@example.com', name: 'Bo' } } },
    ]);
  });

  it('numbers every record of 1,001 apart, the last one too', async () => {
    const rows = Array.from({ length: 1_001 }, (_, i) => `p${i}@example.com`);
    const items = await readAll(Readable.from([`email\r\n${rows.join('\r\n')}\r`]));
    const lines = linesOf(items);
    expect(lines).toHaveLength(1_001);
    expect(new Set(lines).size).toBe(1_001);
    expect(lines.at(-1)).toBe(1_002);
  });
});

/**
 * A file whose lines end in CR, LF and CRLF mixed (rows pasted from another system): csv-parse
 * took the first line end it met for the whole file, so a CR alone stayed inside a field, two
 * records were read as one row of too many columns, and the rows after were numbered wrong.
 */
describe('a CSV of mixed line ends', () => {
  const linesOf = (items: ReadItem[]) => items.map((i) => ('record' in i ? i.record.line : i.error.line));
  const rows = (...ends: string[]) =>
    [
      'email,name',
      'a@example.com,Ann',
      'b@example.com,"Bo\r\nB"',
      'c@example.com,Cy',
      'd@example.com,Di,extra',
      'e@example.com,Ed',
    ]
      .map((row, i) => row + (ends[i % ends.length] ?? ''))
      .join('');

  it.each([
    ['LF, then CR', ['\n', '\r']],
    ['CRLF, then LF', ['\r\n', '\n']],
    ['LF, then CRLF', ['\n', '\r\n']],
    ['CR, then LF', ['\r', '\n']],
    ['CR, then CRLF', ['\r', '\r\n']],
    ['CRLF, then CR', ['\r\n', '\r']],
  ])('ends a record at every line end, %s, and reports a bad row by its own line', async (_, ends) => {
    const text = rows(...ends);
    const expected = [
      { record: { line: 2, fields: { email: 'a@example.com', name: 'Ann' } } },
      { record: { line: 3, fields: { email: 'b@example.com', name: 'Bo\r\nB' } } },
      { record: { line: 5, fields: { email: 'c@example.com', name: 'Cy' } } },
      { error: { line: 6, field: '(row)', reason: 'has 3 columns where the header has 2' } },
      { record: { line: 7, fields: { email: 'e@example.com', name: 'Ed' } } },
    ];
    expect(await readAll(Readable.from([text]))).toEqual(expected);
    // Split anywhere, a CRLF between two chunks too, it reads the same.
    for (let at = 1; at < text.length; at++) {
      const items = await readAll(Readable.from([text.slice(0, at), text.slice(at)]));
      expect(linesOf(items), `split at ${at}`).toEqual([2, 3, 5, 6, 7]);
    }
  });

  it('reads the delimiter off a header line ended by a CR alone', async () => {
    const items = await readAll(Readable.from(['email;name\ra@example.com;Smith, Ann\nb@example.com;Bo\n']));
    expect(records(items)).toEqual([
      { line: 2, fields: { email: 'a@example.com', name: 'Smith, Ann' } },
      { line: 3, fields: { email: 'b@example.com', name: 'Bo' } },
    ]);
  });
});
