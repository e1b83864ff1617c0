import { createReadStream } from 'node:fs';
import { extname } from 'node:path';
import { pipeline, Readable, Transform } from 'node:stream';
import { type CsvError, parse } from 'csv-parse';
import { unstorableReason } from '../db/storableText.js';
import { FatalError } from '../errors.js';
import { childPath, type HiddenByParse, hiddenByParse } from './jsonText.js';

/**
 * A record of an export file: its fields by column name, and the physical line it starts on.
 * `fields` has no prototype (see `newFields`): a column the record lacks is undefined whatever its
 * name, `constructor` or `toString` too.
 */
export interface FileRecord {
  readonly line: number;
  readonly fields: Readonly<Record<string, string>>;
}

/**
 * The fields of a new record. Column names come from the file and the configuration: on a plain
 * object, one that Object.prototype has (`constructor`, `toString`) read a function where the
 * record lacks it, and a JSON key `__proto__` set the prototype instead of being kept.
 */
function newFields(): Record<string, string> {
  return Object.create(null) as Record<string, string>;
}

/** A line that could not be read as a record: reported with its line number, never dropped silently. */
export interface RowError {
  readonly line: number;
  readonly field: string;
  readonly reason: string;
}

/**
 * The file as a whole cannot be read as records (its header is ambiguous, its encoding unsupported)
 * or was not read to its end (a record past MAX_RECORD_TEXT, a quote never closed): it fails as a
 * whole, thrown once the records before the fault have been yielded. The inbox moves it to failed/.
 */
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
  /**
   * Sets of columns a CSV header must have at least one of, each with what it is for (an event's
   * recipient: `email` or `contact_id`): with none, every row would be rejected alike, so the
   * file is refused as a whole, as for a required column.
   */
  readonly requiredOneOf?:
    | ReadonlyArray<{ readonly columns: readonly string[]; readonly for: string }>
    | undefined;
  /**
   * The columns (JSON Lines keys) whose values are used: a record holds only these, and only these
   * are checked, so a column never sent (a free-text `notes`) cannot reject a row, nor, named twice
   * in the header, the file. Every column when absent.
   */
  readonly columnsRead?: ReadonlySet<string> | undefined;
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

/** Byte order marks of encodings that are not read, longest first (UTF-32LE's begins as UTF-16LE's). */
const UNSUPPORTED_BOMS: ReadonlyArray<readonly [Buffer, string]> = [
  [Buffer.from([0xff, 0xfe, 0, 0]), 'UTF-32 (little-endian)'],
  [Buffer.from([0, 0, 0xfe, 0xff]), 'UTF-32 (big-endian)'],
  [Buffer.from([0xff, 0xfe]), 'UTF-16 (little-endian)'],
  [Buffer.from([0xfe, 0xff]), 'UTF-16 (big-endian)'],
];

const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/**
 * A file in UTF-16 or UTF-32 (Excel's "Unicode text") would be decoded as one garbled row with a
 * NUL between letters: it is refused as a whole, saying what it is and what is read instead. So is
 * a UTF-8 file (Excel's "CSV UTF-8") read as windows-1252 or latin1: its byte order mark would be
 * read as `ï»¿` into the first column's name, leaving that column (an external_id) unread, and
 * every accented letter mangled.
 */
function unsupportedEncoding(start: Buffer, encoding: Encoding): RecordFileError | undefined {
  if (encoding !== 'utf-8' && start.subarray(0, UTF8_BOM.length).equals(UTF8_BOM)) {
    return new RecordFileError(
      `the file is UTF-8, by the byte order mark it starts with, but is read as ${encoding} (--encoding / CRM_INBOX_ENCODING): read it as utf-8, or save it as ${encoding}`,
    );
  }
  const found = UNSUPPORTED_BOMS.find(([bom]) => start.subarray(0, bom.length).equals(bom));
  if (found === undefined) return undefined;
  return new RecordFileError(
    `the file is ${found[1]}, by the byte order mark it starts with, and only ${ENCODINGS.join(', ')} are read (--encoding): save it as UTF-8`,
  );
}

/**
 * Decodes a byte stream with a non-fatal decoder: a byte sequence invalid in the chosen encoding
 * becomes U+FFFD, which the readers report as a row error naming the line instead of storing
 * mangled text. (A file that holds U+FFFD itself is reported the same way: it carries no name.)
 * The first four bytes are held until its byte order mark is known.
 */
function decode(encoding: Encoding): Transform {
  const decoder = new TextDecoder(encoding === 'latin1' ? 'windows-1252' : encoding, { ignoreBOM: false });
  let start: Buffer | undefined = Buffer.alloc(0);
  const decodeStart = (): string => {
    const bytes = start!;
    start = undefined;
    const refused = unsupportedEncoding(bytes, encoding);
    if (refused !== undefined) throw refused;
    return decoder.decode(bytes, { stream: true });
  };
  return new Transform({
    readableObjectMode: false,
    transform(chunk: Buffer, _enc, done) {
      try {
        if (start === undefined) return done(null, decoder.decode(chunk, { stream: true }));
        start = Buffer.concat([start, chunk]);
        done(null, start.length < 4 ? '' : decodeStart());
      } catch (error) {
        done(error as Error);
      }
    },
    flush(done) {
      try {
        done(null, (start === undefined ? '' : decodeStart()) + decoder.decode());
      } catch (error) {
        done(error as Error);
      }
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
 * Excel write it: a header row, UTF-8 with or without BOM (or windows-1252), CRLF, LF or CR line
 * ends (mixed too), quoted fields holding delimiters, quotes and newlines. A row with too many or
 * too few columns, a broken JSON line, a JSON key given twice or nested too deep, or invalid bytes
 * in a column read is yielded as an error with its line; the rest go on. A file that cannot be read to its end throws
 * a RecordFileError once the records before the fault are yielded.
 */
export async function* readRecords(
  source: string | Readable,
  options: ReadOptions = {},
): AsyncGenerator<ReadItem> {
  const format = options.format ?? (typeof source === 'string' ? formatOf(source) : 'csv');
  const encoding = options.encoding ?? 'utf-8';
  const bytes = typeof source === 'string' ? createReadStream(source) : source;
  const text = bytes.pipe(decode(encoding));
  // An error of the file (EACCES, EISDIR, an EIO partway) fails the read: pipe alone left it an
  // unhandled 'error' event, and the read waiting for ever. (Not pipeline: it fails the text at an
  // early stop too.) `on`, not `once`: a second error of the source must not end the process.
  bytes.on('error', (error: Error) => text.destroy(error));
  const read = (column: string) => options.columnsRead?.has(column) ?? true;
  let empty = true;
  bytes.once('data', () => {
    empty = false;
  });
  try {
    const holdsText =
      format === 'jsonl'
        ? yield* readJsonLines(text, encoding, read)
        : yield* readCsv(text, encoding, read, options.delimiter, options);
    // Read as a file with nothing changed, an export that failed would go unnoticed.
    if (empty) throw new RecordFileError(EMPTY_FILE);
    // The same (Excel saves an empty sheet as a byte order mark alone), and with no header, not
    // even the email's column could be checked.
    if (!holdsText) throw new RecordFileError(format === 'jsonl' ? NO_LINE : NO_HEADER);
  } finally {
    // Not read to its end (a file fault, a consumer that stopped): the file is closed now, not
    // when the stream is collected, and the text is ended with it, so nothing waits on it. (pipe
    // does not end its source on the other's error.)
    text.destroy();
    bytes.destroy();
  }
}

const EMPTY_FILE = 'empty file (0 bytes, not even a header line): did the export fail?';
const NO_HEADER =
  'no header line (the file holds only blank lines or a byte order mark): did the export fail?';
const NO_LINE =
  'no line of JSON (the file holds only blank lines or a byte order mark): did the export fail?';

/**
 * The most text one record may take, CSV or JSON Lines: past it the file stops being read and
 * fails, so memory stays bounded whatever the file (a quote opened and never closed makes
 * csv-parse hold the rest of the file as one field; csv-parse's own max_record_size drops the rest
 * of its buffer silently).
 */
const MAX_RECORD_TEXT = 16 * 2 ** 20;
const MAX_RECORD_MIB = `${MAX_RECORD_TEXT / 2 ** 20} MiB`;

/** The file fault of a record that started on `line` and was not read to its end. */
function notReadPast(line: number, why: string): RecordFileError {
  return new RecordFileError(
    `line ${line}: ${why}; the file was not read past line ${line - 1}, and fails as a whole`,
  );
}

async function* readJsonLines(
  text: Readable,
  encoding: Encoding,
  read: (column: string) => boolean,
): AsyncGenerator<ReadItem, boolean> {
  let line = 0;
  // Whether a line held anything: a record, or a line refused.
  let holdsText = false;
  // The text of the line being read, as chunks: joined once its end is found, so each character
  // is looked at once however long the line.
  let pending: string[] = [];
  let pendingLength = 0;
  for await (const chunk of text) {
    const s = String(chunk);
    let start = 0;
    for (let end = s.indexOf('\n'); end !== -1; end = s.indexOf('\n', start)) {
      const raw = pending.length === 0 ? s.slice(start, end) : pending.join('') + s.slice(start, end);
      pending = [];
      pendingLength = 0;
      start = end + 1;
      if (raw.length > MAX_RECORD_TEXT) throw lineTooLong(line + 1);
      const item = jsonLineItem(raw, ++line, encoding, read);
      if (item !== undefined) {
        holdsText = true;
        yield item;
      }
    }
    if (start < s.length) {
      pending.push(s.slice(start));
      pendingLength += s.length - start;
      if (pendingLength > MAX_RECORD_TEXT) throw lineTooLong(line + 1);
    }
  }
  if (pending.length > 0) {
    const item = jsonLineItem(pending.join(''), ++line, encoding, read);
    if (item !== undefined) {
      holdsText = true;
      yield item;
    }
  }
  return holdsText;
}

const lineTooLong = (line: number) =>
  notReadPast(line, `the line runs past ${MAX_RECORD_MIB}, the most one record may hold`);

/** One line of JSON Lines: a record, a row error, or nothing (a blank line). */
function jsonLineItem(
  raw: string,
  line: number,
  encoding: Encoding,
  read: (column: string) => boolean,
): ReadItem | undefined {
  const trimmed = raw.replace(/\r$/, '').trim();
  if (trimmed === '') return undefined;
  let value: unknown;
  try {
    // V8 parses without recursion: a value nested thousands deep is parsed, and refused below.
    value = JSON.parse(trimmed);
  } catch {
    return { error: { line, field: '(line)', reason: 'is not valid JSON' } };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { error: { line, field: '(line)', reason: 'is not a JSON object' } };
  }
  const hidden = hiddenByParse(trimmed);
  const fields: Record<string, string> = newFields();
  for (const [k, v] of Object.entries(value)) {
    if (!read(k)) continue;
    const problem = hidden.get(k);
    if (problem !== undefined) return { error: { line, field: k, reason: fieldReason(k, problem) } };
    if (v === null || v === undefined) continue;
    fields[k] = typeof v === 'string' ? v : JSON.stringify(v);
  }
  const bad = unusableField(fields, line, encoding);
  return bad ? { error: bad } : { record: { line, fields } };
}

const DUPLICATE_KEY = 'is given twice in the object: which of its values to take is ambiguous';

/**
 * What JSON.parse hid under the line's key `key` (hiddenByParse), said of that field: the key
 * itself given twice (JSON.parse keeps the last value silently, where a CSV naming a column twice
 * is refused), or something within its value, named by its path when deeper than the value itself.
 */
function fieldReason(key: string, hidden: HiddenByParse): string {
  if (hidden.path === '') return DUPLICATE_KEY;
  return hidden.path === childPath('', key) ? hidden.what : `${hidden.path} ${hidden.what}`;
}

async function* readCsv(
  text: Readable,
  encoding: Encoding,
  read: (column: string) => boolean,
  delimiter: string | undefined,
  required: Pick<ReadOptions, 'requiredColumns' | 'requiredOneOf'>,
): AsyncGenerator<ReadItem, boolean> {
  // The file's lines as they are (csv-parse counts a CRLF inside a quoted field as two).
  const lines = new LineCounter();
  // Text fed to the parser since it last gave a record: past MAX_RECORD_TEXT, the file is read no
  // further, only looked through for the quote that would close the field, to say which it is.
  let sinceRecord = 0;
  let cut: { quoting: boolean; quoteCloses: boolean } | undefined;
  // The delimiter is read off the header line before the parser starts.
  const iterator = text[Symbol.asyncIterator]();
  let head = '';
  const buffered: string[] = [];
  let headerLine: string | undefined;
  // Bounded too: a file with no line break is no CSV, and the guard below ends its reading.
  while (headerLine === undefined && head.length < 2 ** 20) {
    const next = await iterator.next();
    if (next.done) break;
    head += String(next.value);
    buffered.push(String(next.value));
    headerLine = firstLineIn(head, false);
  }
  headerLine ??= firstLineIn(head, true) ?? '';
  const chosen = delimiter ?? detectDelimiter(headerLine.replace(/^\uFEFF/, ''));
  // relax_quotes: a quote inside an unquoted field (`O"Brien`) is kept as written, as Excel reads
  // it. A quote opened and never closed swallows the rest of the file: the file fails, naming it.
  const csv = parse({
    bom: true,
    delimiter: chosen,
    relax_column_count: true,
    relax_quotes: true,
    skip_empty_lines: true,
    skip_records_with_error: true,
    // Every line end ends a record, whichever the file's first line has: left to discover one,
    // csv-parse takes the first it meets for the whole file, so in a file of mixed ends (lines
    // pasted from another system) a CR alone stayed inside a field, two records read as one row,
    // and every line number after it was off.
    record_delimiter: ['\r\n', '\n', '\r'],
    info: true,
    // Counted as the parser gives each record, not as this reader takes it: a reader slow to
    // take them (waiting on the database) is not a record too large. The part of a record the
    // parser holds when the file is cut is given as one at its end: it is not taken.
    on_record: (item: string[]) => {
      if (cut !== undefined) return null;
      sinceRecord = 0;
      return item;
    },
  });
  const replay = Readable.from(
    (async function* () {
      for (const chunk of buffered) {
        lines.add(chunk);
        yield chunk;
      }
      for (;;) {
        const next = await iterator.next();
        if (next.done) return;
        const chunk = String(next.value);
        sinceRecord += chunk.length;
        if (sinceRecord > MAX_RECORD_TEXT) {
          const quoting = parserIsQuoting(csv);
          cut = { quoting, quoteCloses: quoting && (await quoteCloses(chunk, iterator, lines)) };
          await iterator.return?.();
          return;
        }
        lines.add(chunk);
        yield chunk;
      }
    })(),
  );
  // pipeline, not pipe: an error of the text (the file failing partway, EIO or ESTALE) fails the
  // parser, whose reader below rejects with it, where pipe left it an 'error' event nobody
  // listens to, which ends the process. Whatever ends the pipeline reaches the reader through
  // the parser: the callback has nothing to add (an early stop is a premature close).
  const parser = pipeline(replay, csv, () => {});
  const skipped: CsvError[] = [];
  parser.on('skip', (error: CsvError) => skipped.push(error));
  let header: string[] | undefined;
  // csv-parse counts a CRLF inside a quoted field as two lines; what it over-counts is taken off.
  let overCounted = 0;
  let lastLine = 0;
  let seen = 0;
  // The file was not read to its end: it fails, once the records before are yielded.
  const notReadToTheEnd = (): RecordFileError => {
    const from = lastLine + 1;
    if (cut?.quoteCloses) {
      return notReadPast(from, `a quoted field runs past ${MAX_RECORD_MIB}, the most one record may hold`);
    }
    if (cut !== undefined && !cut.quoting) {
      return notReadPast(from, `the record runs past ${MAX_RECORD_MIB}, the most one record may hold`);
    }
    const to = Math.max(from, lines.lastLine);
    return notReadPast(
      from,
      `opens a quote that is never closed (lines ${from}-${to}, to the end of the file)`,
    );
  };
  // A skip is reported once the records parsed before it have been.
  const reportSkipped = function* (all = false): Generator<ReadItem> {
    while (skipped.length > 0 && (all || Number(skipped[0]!.records ?? 0) <= seen)) {
      const error = skipped.shift()!;
      if (error.code === 'CSV_QUOTE_NOT_CLOSED') throw notReadToTheEnd();
      const from = lastLine + 1;
      const to = Math.max(from, Number(error.lines ?? from) - overCounted);
      yield {
        error: { line: from, field: '(row)', reason: `could not be read (${error.message.split(':')[0]})` },
      };
      lastLine = to;
    }
  };
  for await (const item of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
    yield* reportSkipped();
    seen++;
    const breaks = countLineBreaks(item.record);
    const line = item.info.lines - breaks.counted - overCounted;
    overCounted += breaks.counted - breaks.real;
    lastLine = line + breaks.real;
    if (header === undefined) {
      header = item.record.map((h) => h.trim());
      checkHeader(header, read, required.requiredColumns ?? new Map(), required.requiredOneOf ?? []);
      continue;
    }
    if (item.record.length !== header.length) {
      const reason = `has ${item.record.length} columns where the header has ${header.length}`;
      yield { error: { line, field: '(row)', reason } };
      continue;
    }
    const fields: Record<string, string> = newFields();
    header.forEach((name, i) => {
      if (read(name)) fields[name] = item.record[i]!;
    });
    const bad = unusableField(fields, line, encoding);
    yield bad ? { error: bad } : { record: { line, fields } };
  }
  yield* reportSkipped(true);
  if (cut !== undefined) throw notReadToTheEnd();
  return header !== undefined;
}

/**
 * The first line of `text` that is not empty, which csv-parse takes for the header (it skips
 * empty lines): reading the very first, a blank line before the header made a `;` file be read as
 * `,` and refused. Only a line whose end is in `text`, unless `text` is the whole file.
 */
function firstLineIn(text: string, whole: boolean): string | undefined {
  const lines = text.split(LINE_BREAK);
  if (!whole) lines.pop();
  return lines.find((line) => line !== '');
}

/**
 * Whether csv-parse is inside a quoted field: at the bound, a field too large or a quote never
 * closed. (Its state is not in its types; a version without it makes every cut "a record".)
 */
function parserIsQuoting(parser: object): boolean {
  return (parser as { state?: { quoting?: unknown } }).state?.quoting === true;
}

/**
 * Whether the quoted field the parser is in closes before the file ends, looking through the rest
 * of the text (`first`, then `rest`) without keeping it: `""` is a quote inside it; any other
 * quote closes it. Every line looked through is counted, to name the last line of the file.
 */
async function quoteCloses(
  first: string,
  rest: AsyncIterator<unknown>,
  lines: LineCounter,
): Promise<boolean> {
  let quoteBefore = false;
  for (let chunk: string | undefined = first; chunk !== undefined; ) {
    lines.add(chunk);
    for (let i = 0; i < chunk.length; ) {
      if (quoteBefore) {
        if (chunk[i] !== '"') return true;
        quoteBefore = false;
        i++;
        continue;
      }
      const quote = chunk.indexOf('"', i);
      if (quote === -1) break;
      quoteBefore = true;
      i = quote + 1;
    }
    const next = await rest.next();
    chunk = next.done ? undefined : String(next.value);
  }
  return quoteBefore;
}

const LINE_BREAK = /\r\n|\r|\n/g;

/** Counts the lines of a text as it streams: CRLF, LF or CR once each, a CRLF split between chunks too. */
class LineCounter {
  #breaks = 0;
  #afterCr = false;
  #endsLine = true;

  add(chunk: string): void {
    if (chunk === '') return;
    this.#breaks += chunk.match(LINE_BREAK)?.length ?? 0;
    if (this.#afterCr && chunk[0] === '\n') this.#breaks--;
    this.#afterCr = chunk.endsWith('\r');
    this.#endsLine = this.#afterCr || chunk.endsWith('\n');
  }

  /** The number of the last line: a break at the end of the text ends a line, and opens none. */
  get lastLine(): number {
    return this.#breaks + (this.#endsLine ? 0 : 1);
  }
}

/**
 * Two columns of one name would make every row ambiguous, and a column the mapping needs missing
 * would read every row wrong (a renamed `CRM ID` column: every contact sent without its
 * external_id): the file is refused as a whole. A column named twice but never read is no
 * ambiguity, as neither value is taken (CRMs export two `Phone` or `Address` columns).
 */
function checkHeader(
  header: readonly string[],
  read: (column: string) => boolean,
  required: ReadonlyMap<string, string>,
  oneOf: NonNullable<ReadOptions['requiredOneOf']>,
): void {
  const seen = new Map<string, number>();
  header.forEach((name, i) => {
    if (name === '') return;
    const first = seen.get(name);
    if (first !== undefined && read(name)) {
      throw new RecordFileError(
        `the header names column "${name}" twice (columns ${first + 1} and ${i + 1}): rename one`,
      );
    }
    seen.set(name, i);
  });
  const columns = header.map((h) => `"${h}"`).join(', ');
  const missing = [...required].filter(([name]) => !seen.has(name));
  if (missing.length > 0) {
    const named = missing.map(([name, namedBy]) => `"${name}" (${namedBy})`).join(', ');
    const noun = missing.length === 1 ? 'column' : 'columns';
    throw new RecordFileError(`the header has no ${noun} ${named}; its columns: ${columns}`);
  }
  for (const set of oneOf) {
    if (!set.columns.some((name) => seen.has(name))) {
      const names = set.columns.map((n) => `"${n}"`).join(' or ');
      throw new RecordFileError(`the header has no column ${names} (${set.for}); its columns: ${columns}`);
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
    real += v.match(LINE_BREAK)?.length ?? 0;
  }
  return { counted, real };
}
