import { createReadStream } from 'node:fs';
import { extname } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { type CsvError, parse } from 'csv-parse';
import { unstorableReason } from '../db/storableText.js';
import { FatalError } from '../errors.js';

/** A record of an export file: its fields by column name, and the physical line it starts on. */
export interface FileRecord {
  readonly line: number;
  readonly fields: Readonly<Record<string, string>>;
}

/** A line that could not be read as a record: reported with its line number, never dropped silently. */
export interface RowError {
  readonly line: number;
  readonly field: string;
  readonly reason: string;
}

/** The file as a whole cannot be read as records (its header is ambiguous): nothing is sent. */
export class RecordFileError extends FatalError {
  override readonly name = 'RecordFileError';
}

export type ReadItem = { readonly record: FileRecord } | { readonly error: RowError };

export const ENCODINGS = ['utf-8', 'windows-1252', 'latin1'] as const;
export type Encoding = (typeof ENCODINGS)[number];
export type FileFormat = 'csv' | 'jsonl';

export interface ReadOptions {
  readonly format?: FileFormat | undefined;
  /** `,`, `;` or a tab; detected from the header line when absent. */
  readonly delimiter?: string | undefined;
  readonly encoding?: Encoding | undefined;
  /**
   * Columns a CSV header must have, each with what names it (`contacts.columns.external_id`): with
   * one missing, every row would be read wrong, so the file is refused as a whole. (A JSON Lines
   * object may leave out what it has no value for, so it is not checked.)
   */
  readonly requiredColumns?: ReadonlyMap<string, string> | undefined;
}

/** The format a file's name implies: `.jsonl`/`.ndjson` are JSON Lines, anything else CSV. */
export function formatOf(path: string): FileFormat {
  return ['.jsonl', '.ndjson'].includes(extname(path).toLowerCase()) ? 'jsonl' : 'csv';
}

/**
 * The delimiter of a CSV header line: the most frequent of `,`, `;` and tab outside quotes (Excel
 * writes `;` where the decimal separator is a comma).
 */
export function detectDelimiter(headerLine: string): string {
  const counts = new Map<string, number>([
    [',', 0],
    [';', 0],
    ['\t', 0],
  ]);
  let quoted = false;
  for (const ch of headerLine) {
    if (ch === '"') quoted = !quoted;
    else if (!quoted && counts.has(ch)) counts.set(ch, counts.get(ch)! + 1);
  }
  const [best, count] = [...counts.entries()].sort((a, b) => b[1] - a[1])[0]!;
  return count > 0 ? best : ',';
}

/**
 * Decodes a byte stream with a non-fatal decoder: a byte sequence invalid in the chosen encoding
 * becomes U+FFFD, which the readers report as a row error naming the line instead of storing
 * mangled text. (A file that holds U+FFFD itself is reported the same way: it carries no name.)
 */
function decode(encoding: Encoding): Transform {
  const decoder = new TextDecoder(encoding === 'latin1' ? 'windows-1252' : encoding, { ignoreBOM: false });
  return new Transform({
    readableObjectMode: false,
    transform(chunk: Buffer, _enc, done) {
      done(null, decoder.decode(chunk, { stream: true }));
    },
    flush(done) {
      done(null, decoder.decode());
    },
  });
}

const REPLACEMENT = '\uFFFD';

/**
 * A field the row cannot be taken with: bytes the encoding does not read, or characters PostgreSQL
 * cannot hold (U+0000, half a character escaped in JSON), which would fail the row's whole batch
 * in the database. Each is reported with its line; the text is never altered into something the
 * CRM did not say.
 */
function unusableField(
  fields: Record<string, string>,
  line: number,
  encoding: Encoding,
): RowError | undefined {
  for (const [field, value] of Object.entries(fields)) {
    if (value.includes(REPLACEMENT)) {
      return { line, field, reason: `holds bytes that are not valid ${encoding}` };
    }
    const unstorable = unstorableReason(value);
    if (unstorable !== undefined) return { line, field, reason: unstorable };
  }
  return undefined;
}

/**
 * Streams the records of a CSV or JSON Lines export, memory flat whatever its size. CSV as CRMs and
 * Excel write it: a header row, UTF-8 with or without BOM (or windows-1252), CRLF or LF, quoted
 * fields holding delimiters, quotes and newlines. A row with too many or too few columns, a
 * broken JSON line or invalid bytes is yielded as an error with its line; the rest go on.
 */
export async function* readRecords(
  source: string | Readable,
  options: ReadOptions = {},
): AsyncGenerator<ReadItem> {
  const format = options.format ?? (typeof source === 'string' ? formatOf(source) : 'csv');
  const encoding = options.encoding ?? 'utf-8';
  const bytes = typeof source === 'string' ? createReadStream(source) : source;
  const text = bytes.pipe(decode(encoding));
  if (format === 'jsonl') yield* readJsonLines(text, encoding);
  else yield* readCsv(text, encoding, options.delimiter, options.requiredColumns);
}

async function* readJsonLines(text: Readable, encoding: Encoding): AsyncGenerator<ReadItem> {
  let line = 0;
  let rest = '';
  const handle = function* (raw: string): Generator<ReadItem> {
    line++;
    const trimmed = raw.replace(/\r$/, '').trim();
    if (trimmed === '') return;
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch {
      yield { error: { line, field: '(line)', reason: 'is not valid JSON' } };
      return;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      yield { error: { line, field: '(line)', reason: 'is not a JSON object' } };
      return;
    }
    const fields: Record<string, string> = {};
    for (const [k, v] of Object.entries(value)) {
      if (v === null || v === undefined) continue;
      // JSON.parse has already rounded it: 9007199254740993 would be sent as …992, another CRM id.
      if (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v)) {
        yield {
          error: {
            line,
            field: k,
            reason: 'is a whole number too large to read exactly: write it as a string',
          },
        };
        return;
      }
      fields[k] = typeof v === 'string' ? v : JSON.stringify(v);
    }
    const bad = unusableField(fields, line, encoding);
    yield bad ? { error: bad } : { record: { line, fields } };
  };
  for await (const chunk of text) {
    const parts = (rest + String(chunk)).split('\n');
    rest = parts.pop()!;
    for (const part of parts) yield* handle(part);
  }
  if (rest !== '') yield* handle(rest);
}

/**
 * Text fed to the parser since it last gave a record, past which the file stops being read: a quote
 * opened and never closed makes csv-parse hold the rest of the file as one field, and a large
 * export would take the memory of the whole process with it. (csv-parse's own max_record_size
 * drops the rest of its buffer silently.)
 */
const MAX_TEXT_WITHOUT_RECORD = 16 * 2 ** 20;

async function* readCsv(
  text: Readable,
  encoding: Encoding,
  delimiter: string | undefined,
  requiredColumns: ReadonlyMap<string, string> | undefined,
): AsyncGenerator<ReadItem> {
  // The delimiter is read off the header line before the parser starts.
  const iterator = text[Symbol.asyncIterator]();
  let head = '';
  const buffered: string[] = [];
  // Bounded too: a file with no line break is no CSV, and the guard below ends its reading.
  while (!head.includes('\n') && head.length < 2 ** 20) {
    const next = await iterator.next();
    if (next.done) break;
    head += String(next.value);
    buffered.push(String(next.value));
  }
  const chosen = delimiter ?? detectDelimiter(head.split('\n')[0]!.replace(/^\uFEFF/, ''));
  let sinceRecord = 0;
  let cutShort = false;
  const replay = Readable.from(
    (async function* () {
      yield* buffered;
      for (;;) {
        const next = await iterator.next();
        if (next.done) return;
        const chunk = String(next.value);
        sinceRecord += chunk.length;
        if (sinceRecord > MAX_TEXT_WITHOUT_RECORD) {
          cutShort = true;
          await iterator.return?.();
          return;
        }
        yield chunk;
      }
    })(),
  );
  // relax_quotes: a quote inside an unquoted field (`O"Brien`) is kept as written, as Excel reads
  // it. A quote opened and never closed swallows the rest of the file: that is skipped and
  // reported, naming the lines lost.
  const parser = replay.pipe(
    parse({
      bom: true,
      delimiter: chosen,
      relax_column_count: true,
      relax_quotes: true,
      skip_empty_lines: true,
      skip_records_with_error: true,
      info: true,
    }),
  );
  const skipped: CsvError[] = [];
  parser.on('skip', (error: CsvError) => skipped.push(error));
  let header: string[] | undefined;
  // csv-parse counts a CRLF inside a quoted field as two lines; what it over-counts is taken off.
  let overCounted = 0;
  let lastLine = 0;
  let seen = 0;
  // A skip is reported once the records parsed before it have been.
  const reportSkipped = function* (all = false): Generator<ReadItem> {
    while (skipped.length > 0 && (all || Number(skipped[0]!.records ?? 0) <= seen)) {
      const error = skipped.shift()!;
      const from = lastLine + 1;
      const to = Math.max(from, Number(error.lines ?? from) - overCounted);
      const reason =
        error.code === 'CSV_QUOTE_NOT_CLOSED'
          ? `opens a quote that is never closed: lines ${from}-${to} could not be read`
          : `could not be read (${error.message.split(':')[0]})`;
      yield { error: { line: from, field: '(row)', reason } };
      lastLine = to;
    }
  };
  for await (const item of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
    yield* reportSkipped();
    seen++;
    sinceRecord = 0;
    const breaks = countLineBreaks(item.record);
    const line = item.info.lines - breaks.counted - overCounted;
    overCounted += breaks.counted - breaks.real;
    lastLine = line + breaks.real;
    if (header === undefined) {
      header = item.record.map((h) => h.trim());
      checkHeader(header, requiredColumns ?? new Map());
      continue;
    }
    if (item.record.length !== header.length) {
      const reason = `has ${item.record.length} columns where the header has ${header.length}`;
      yield { error: { line, field: '(row)', reason } };
      continue;
    }
    const fields: Record<string, string> = {};
    header.forEach((name, i) => {
      fields[name] = item.record[i]!;
    });
    const bad = unusableField(fields, line, encoding);
    yield bad ? { error: bad } : { record: { line, fields } };
  }
  yield* reportSkipped(true);
  if (cutShort) {
    const reason = `was not read, nor anything after it: one record ran past ${MAX_TEXT_WITHOUT_RECORD / 2 ** 20} MiB of text (a quote opened and never closed?)`;
    yield { error: { line: lastLine + 1, field: '(row)', reason } };
  }
}

/**
 * Two columns of one name would make every row ambiguous, and a column the mapping needs missing
 * would read every row wrong (a renamed `CRM ID` column: every contact sent without its
 * external_id): the file is refused as a whole.
 */
function checkHeader(header: readonly string[], required: ReadonlyMap<string, string>): void {
  const seen = new Map<string, number>();
  header.forEach((name, i) => {
    if (name === '') return;
    const first = seen.get(name);
    if (first !== undefined) {
      throw new RecordFileError(
        `the header names column "${name}" twice (columns ${first + 1} and ${i + 1}): rename one`,
      );
    }
    seen.set(name, i);
  });
  for (const [name, namedBy] of required) {
    if (!seen.has(name)) {
      throw new RecordFileError(
        `the header has no column "${name}" (${namedBy}); its columns: ${header.map((h) => `"${h}"`).join(', ')}`,
      );
    }
  }
}

/**
 * Line breaks inside the quoted fields of a record: as csv-parse counts them (CR and LF each) and
 * as they are (CRLF, LF or CR once each), so records are numbered by the line they start on.
 */
function countLineBreaks(values: readonly string[]): { counted: number; real: number } {
  let counted = 0;
  let real = 0;
  for (const v of values) {
    for (const ch of v) if (ch === '\n' || ch === '\r') counted++;
    real += v.match(/\r\n|\r|\n/g)?.length ?? 0;
  }
  return { counted, real };
}
