import { Writable } from 'node:stream';
import { type Logger, pino } from 'pino';

export type { Logger };

/**
 * Values that must never leave the process in a log line. Redaction by path catches the known
 * fields; this catches the same values anywhere else (an error message, a URL, a nested body).
 * Secrets learned at run time (a signing secret read from the database) are added to it.
 */
export class SecretScrubber {
  readonly #values = new Set<string>();

  constructor(values: Iterable<string> = []) {
    for (const v of values) this.add(v);
  }

  add(value: string): void {
    // Very short values would scrub ordinary words; no real key or secret is that short.
    if (value.length >= 6) this.#values.add(value);
  }

  scrub(text: string): string {
    let out = text;
    for (const v of this.#values) if (out.includes(v)) out = out.replaceAll(v, '[REDACTED]');
    return out;
  }
}

const REDACT_PATHS = [
  'apiKey',
  'key',
  'secret',
  'secrets',
  'signing_secret',
  'signingSecret',
  'headers["x-api-key"]',
  'req.headers["x-api-key"]',
  '*.apiKey',
  '*.secret',
  '*.secrets',
  '*.signing_secret',
  '*.signingSecret',
  '*.headers["x-api-key"]',
];

export interface LoggerOptions {
  level: string;
  scrubber: SecretScrubber;
  /** Where JSON lines go; stdout by default. Tests pass a collector. */
  destination?: NodeJS.WritableStream;
}

export function makeLogger({ level, scrubber, destination = process.stdout }: LoggerOptions): Logger {
  const sink = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      destination.write(scrubber.scrub(chunk.toString()));
      callback();
    },
  });
  return pino(
    {
      level,
      base: { service: 'review-mirror' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    sink,
  );
}
