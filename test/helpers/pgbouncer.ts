import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './cli.js';

export interface RunningPgBouncer {
  /** `target` with its host and port replaced by the pooler's. */
  readonly url: string;
  /** The pooler's log, for a failing test to show. */
  log(): Promise<string>;
  close(): Promise<void>;
}

const canConnect = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      socket.end();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });

/**
 * A real PgBouncer (the Debian binary) in transaction-pooling mode in front of `target`, with a
 * config directory of its own. It refuses to run as root, so as root it is started as `postgres`.
 */
export async function startPgBouncer(
  target: string,
  options: { poolSize?: number } = {},
): Promise<RunningPgBouncer> {
  const server = new URL(target);
  const database = server.pathname.slice(1) || 'postgres';
  const dir = await mkdtemp(join(tmpdir(), 'rm-pgbouncer-'));
  await chmod(dir, 0o777); // written by the postgres user
  const port = await freePort();
  const ini = join(dir, 'pgbouncer.ini');
  await writeFile(
    ini,
    [
      '[databases]',
      `${database} = host=${server.hostname} port=${server.port || 5432} dbname=${database} user=${decodeURIComponent(server.username) || 'postgres'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      'pool_mode = transaction',
      'max_client_conn = 500',
      `default_pool_size = ${options.poolSize ?? 20}`,
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      '',
    ].join('\n'),
  );
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = asRoot
    ? spawn('runuser', ['-u', 'postgres', '--', 'pgbouncer', ini], { stdio: 'ignore' })
    : spawn('pgbouncer', [ini], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let spawnError: Error | undefined;
  child.once('error', (error) => {
    spawnError = error;
  });
  const log = () => readFile(join(dir, 'pgbouncer.log'), 'utf8').catch(() => '');
  const deadline = Date.now() + 15_000;
  while (!(await canConnect(port))) {
    if (spawnError !== undefined) {
      throw new Error(
        `pgbouncer could not be started (${spawnError.message}): install the Debian package pgbouncer, as .ci/run does`,
      );
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`pgbouncer did not start:\n${await log()}`);
    }
    await sleep(50);
  }
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    log,
    close: async () => {
      // runuser forwards the signal; the pid file names pgbouncer itself, should it not.
      const pid = Number((await readFile(join(dir, 'pgbouncer.pid'), 'utf8').catch(() => '')).trim());
      child.kill('SIGTERM');
      if (pid > 0) {
        try {
          process.kill(pid, 'SIGTERM');
        } catch {
          // already gone
        }
      }
      await Promise.race([exited, sleep(5_000)]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
