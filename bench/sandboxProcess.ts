import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';

/**
 * The platform of the soak and the benchmarks, as a deployment meets it: `review-mirror sandbox`
 * in its own process, so it never shares an event loop with what it serves.
 */
export interface SandboxProcess {
  readonly url: string;
  readonly apiKey: string;
  readonly companyId: string;
  /** Its process id, for the CPU it spends (bench/cpuAccount.ts). */
  readonly pid: number | undefined;
  /** Everything it printed, for the failure message when it dies. */
  readonly output: () => string;
  /** False once it has exited: every request the driver and the daemons made since failed. */
  readonly alive: () => boolean;
  close(): Promise<void>;
}

/**
 * Starts `review-mirror sandbox` on a free port and reads its URL, API key and company from the
 * banner it prints once listening. Resolves when it is ready; rejects if it exits first.
 */
export async function startSandboxProcess(
  cli: string,
  options: { seed: number; seedReviews: number; timeScale?: number; surveyDelayMs?: number },
): Promise<SandboxProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      cli,
      'sandbox',
      '--port',
      '0',
      '--seed',
      String(options.seed),
      '--seed-reviews',
      String(options.seedReviews),
      '--time-scale',
      String(options.timeScale ?? 1),
      '--survey-delay-ms',
      String(options.surveyDelayMs ?? 3_000),
      '--allow-http-webhooks',
    ],
    { env: process.env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
  const field = (name: string) => new RegExp(`^${name}:\\s+(\\S+)`, 'm').exec(output)?.[1];
  const exited = once(child, 'exit');
  const ready = new Promise<void>((resolve) => {
    const check = () => {
      if (field('control') !== undefined) {
        child.stdout!.off('data', check);
        resolve();
      }
    };
    child.stdout!.on('data', check);
  });
  const first = await Promise.race([
    ready.then(() => 'ready' as const),
    exited.then(() => 'exited' as const),
  ]);
  if (first === 'exited') throw new Error(`the sandbox exited before it was ready:\n${output}`);
  return {
    url: field('base_url')!,
    apiKey: field('api_key')!,
    companyId: field('company_id')!,
    output: () => output,
    pid: child.pid,
    alive: () => child.exitCode === null && child.signalCode === null,
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}
