import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/**
 * A loopback TCP port free right now, for a child process told its port (its webhook URL must be
 * known before it starts). Another process may take it in between: tests only.
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** The built CLI, exactly what `npx review-mirror` and the Dockerfile run (`npm test` builds it first). */
export const CLI = fileURLToPath(new URL('../../dist/src/cli.js', import.meta.url));

/** A minimal environment: the child sees only what a test gives it, never the developer's variables. */
export function cliEnv(vars: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn' };
  for (const [k, v] of Object.entries(vars)) if (v !== undefined) env[k] = v;
  return env;
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A running CLI process, collecting its output. */
export class CliProcess {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<CliResult>;

  constructor(args: string[], env: NodeJS.ProcessEnv, cwd?: string) {
    this.child = spawn(process.execPath, [CLI, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.stdout += d;
    });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.stderr += d;
    });
    this.exited = once(this.child, 'exit').then(([code, signal]) => ({
      code: code as number | null,
      signal: signal as NodeJS.Signals | null,
      stdout: this.stdout,
      stderr: this.stderr,
    }));
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    this.child.kill(signal);
  }
}

export function runCli(args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<CliResult> {
  return new CliProcess(args, env, cwd).exited;
}

/**
 * Polls `url` until it answers (any status) with `run` no longer saying it is starting, or
 * `timeoutMs` passes; returns that response. The bound is generous: a daemon on the embedded
 * database starts in seconds, but two test workers on two cores can stretch that several times.
 */
export async function waitForHttp(url: string, timeoutMs = 45_000): Promise<Response> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      // `run`'s admin server answers while it starts (liveness): wait for the daemon to be up.
      const body: unknown = res.headers.get('content-type')?.includes('json')
        ? await res
            .clone()
            .json()
            .catch(() => undefined)
        : undefined;
      if ((body as { status?: unknown } | undefined)?.status !== 'starting') return res;
      await res.body?.cancel();
      lastError = `still starting: ${JSON.stringify(body)}`;
      await new Promise((r) => setTimeout(r, 100));
    } catch (error) {
      lastError = error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms: ${String(lastError)}`);
}
