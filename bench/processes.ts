import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { type CpuSample, processCpuSeconds } from './cpuAccount.js';

/** The built CLI, run the way a user runs it: `node dist/src/cli.js …`. */
export const CLI = fileURLToPath(new URL('../src/cli.js', import.meta.url));

/** The environment of a child CLI: the bench's own, less anything that would reconfigure it. */
export function cliEnv(vars: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn' };
  for (const [name, value] of Object.entries(vars)) if (value !== undefined) env[name] = value;
  return env;
}

/** Whether a loopback listener can take `port` now (0: any), and the port it got. */
function listenOn(port: number): Promise<number | undefined> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const { port: got } = server.address() as { port: number };
      server.close(() => resolve(got));
    });
  });
}

/** The lowest port the kernel hands out to outgoing connections (Linux's default 32768). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) ? low : 32_768;
  } catch {
    return 32_768;
  }
}

const FIRST_CHOSEN_PORT = 10_000;

/** The next port freePort tries: from a random start, then one after another, never one given twice. */
let nextPort: number | undefined;

/**
 * A port nothing listens on now, for a child told its port before it starts (a daemon's webhook
 * URL). Below the ephemeral range: a port from it (what listening on port 0 gives) may be taken in
 * between by any outgoing connection of this machine, the child's own to its database among them,
 * made before it listens: the likely cause of a soak run whose replica, started after the
 * benchmarks, never became ready.
 * One after another from a random start, so that the ports chosen for children not started yet
 * are never chosen twice. Another listener may still take one: benchmarks and the soak only.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  const span = low - FIRST_CHOSEN_PORT;
  if (span > 1_000) {
    nextPort ??= FIRST_CHOSEN_PORT + Math.floor(Math.random() * span);
    for (let attempt = 0; attempt < 200; attempt++) {
      const port = nextPort;
      nextPort = FIRST_CHOSEN_PORT + ((nextPort - FIRST_CHOSEN_PORT + 1) % span);
      if ((await listenOn(port)) !== undefined) return port;
    }
  }
  const any = await listenOn(0);
  if (any === undefined) throw new Error('no loopback port to listen on');
  return any;
}

/** Linux's high-water mark of a process's resident memory, in bytes; undefined once it has exited. */
function peakRss(pid: number): number | undefined {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly seconds: number;
  /** The highest VmHWM read while it ran (sampled every 10 ms: the last few ms may be missed). */
  readonly peakRssBytes: number;
  /**
   * Its CPU seconds as read every 10 ms while it ran, so a benchmark can tell what it spent within
   * a stretch of its run (the job a `sync_runs` row times) from what it spent starting.
   */
  readonly cpuSamples: readonly CpuSample[];
}

/** Which `node` runs a CLI process (default: the bench's own), and flags it gets before the script. */
export interface NodeCommand {
  readonly node?: string;
  readonly flags?: readonly string[];
}

/**
 * Runs the CLI as a separate process to its end, measuring its wall time and peak memory;
 * `command.flags` go to node before the script, as a container's command would put them.
 */
export async function runCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  command: NodeCommand = {},
): Promise<CliRun> {
  const start = process.hrtime.bigint();
  const child = spawn(command.node ?? process.execPath, [...(command.flags ?? []), CLI, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  let peak = 0;
  const cpuSamples: CpuSample[] = [];
  const sampler = setInterval(() => {
    peak = Math.max(peak, peakRss(child.pid!) ?? 0);
    const seconds = processCpuSeconds(child.pid);
    if (seconds !== undefined) cpuSamples.push({ atMs: Date.now(), seconds });
  }, 10);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearInterval(sampler);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return { code, stdout, stderr, seconds, peakRssBytes: peak, cpuSamples };
}

/** Like runCli, but a non-zero exit is an error naming the command and its last line. */
export async function runCliOk(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  command: NodeCommand = {},
): Promise<CliRun> {
  const run = await runCli(args, env, command);
  if (run.code !== 0) {
    throw new Error(
      `review-mirror ${args.join(' ')} exited ${run.code}: ${run.stderr.trim().split('\n').at(-1)}`,
    );
  }
  return run;
}

/** What `node --version` prints for the Node at `node` (BENCH_IMAGE_NODE's), e.g. `v26.10.0`. */
export function nodeVersion(node: string): string {
  return execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
}

/** A long-running child process, stopped by SIGTERM (SIGKILL after 10 s). */
export interface Child {
  readonly process: ChildProcess;
  /** Everything it has written to stdout so far. */
  stdout(): string;
  stop(): Promise<void>;
}

/** Spawns `node args…` in the background, with this process's Node unless given another. */
export function spawnChild(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  node: string = process.execPath,
): Child {
  const proc = spawn(node, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  proc.stderr!.resume();
  const exited = new Promise<void>((resolve) => proc.on('close', () => resolve()));
  return {
    process: proc,
    stdout: () => stdout,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Spawns `node args…` and resolves once its stdout matches `ready` (60 s at most), with that match. */
export async function spawnUntil(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  node?: string,
): Promise<{ child: Child; match: RegExpExecArray }> {
  const child = spawnChild(args, env, node);
  try {
    const match = await new Promise<RegExpExecArray>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not ready within 60 s: ${args.join(' ')}`)), 60_000);
      const check = () => {
        const found = ready.exec(child.stdout());
        if (found) {
          clearTimeout(timer);
          resolve(found);
        }
      };
      child.process.stdout!.on('data', check);
      child.process.on('close', (code) => {
        clearTimeout(timer);
        reject(new Error(`exited ${code} before it was ready: ${args.join(' ')}`));
      });
    });
    return { child, match };
  } catch (error) {
    await child.stop();
    throw error;
  }
}
