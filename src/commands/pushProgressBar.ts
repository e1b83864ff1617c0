import { Presets, SingleBar } from 'cli-progress';
import type { PushProgress } from '../push/contacts/pushContacts.js';

const PHASE = { reading: 'reading', sending: 'sending' } as const;

/**
 * A progress bar for long pushes, on a terminal only (a pipe or a log file gets the summary line
 * alone): the phase, the share done, rows per second and the time left.
 */
export function terminalPushProgress(
  stream: NodeJS.WriteStream = process.stderr,
): (PushProgress & { stop(): void }) | undefined {
  if (!stream.isTTY) return undefined;
  const bar = new SingleBar(
    {
      stream,
      format: '{phase} [{bar}] {percentage}% | {rows} rows | {rate} rows/s | ETA {eta_formatted}',
      hideCursor: true,
      etaBuffer: 20,
      fps: 5,
    },
    Presets.shades_classic,
  );
  let phase: keyof typeof PHASE | undefined;
  let phaseStarted = 0;
  return {
    update(next, done, total, rows) {
      const now = performance.now();
      if (next !== phase) {
        if (phase !== undefined) bar.stop();
        phase = next;
        phaseStarted = now;
        bar.start(Math.max(total, 1), 0, { phase: PHASE[next], rows: 0, rate: 0 });
      }
      const seconds = (now - phaseStarted) / 1000;
      bar.setTotal(Math.max(total, 1));
      bar.update(done, { rows, rate: seconds > 0 ? Math.round(rows / seconds) : 0 });
    },
    stop() {
      if (phase !== undefined) bar.stop();
    },
  };
}
