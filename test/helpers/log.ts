import { makeLogger, SecretScrubber } from '../../src/log.js';

/** A logger that writes nothing, for the parts under test that need one. */
export const quietLog = makeLogger({ level: 'silent', scrubber: new SecretScrubber() });

/** A logger whose lines (warn and above) the test reads. */
export function capturedLog() {
  const lines: Array<{ level: string; msg: string; idempotency_key?: string }> = [];
  const destination = { write: (line: string) => lines.push(JSON.parse(line)) };
  const log = makeLogger({
    level: 'warn',
    scrubber: new SecretScrubber(),
    destination: destination as unknown as NodeJS.WritableStream,
  });
  return { log, lines };
}
