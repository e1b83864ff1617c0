import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cliEnv, freePort, waitForHttp } from '../helpers/cli.js';

/**
 * No Docker engine runs here, so the Dockerfile is kept honest by running what it runs: its
 * ENTRYPOINT + CMD with its ENV, from the same built files, and its HEALTHCHECK against that.
 */
const root = fileURLToPath(new URL('../..', import.meta.url));
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
const lines = dockerfile.split('\n');
const finalStage = lines.slice(lines.findLastIndex((l) => l.startsWith('FROM ')));

/** The exec-form command of an instruction (for HEALTHCHECK, the array after its options' CMD). */
const jsonArrayOf = (instruction: string): string[] => {
  const line = finalStage.find((l) => l.startsWith(`${instruction} `));
  if (!line) throw new Error(`Dockerfile has no ${instruction}`);
  return JSON.parse(line.slice(line.indexOf('['))) as string[];
};

describe('the Dockerfile', () => {
  it('copies only paths that exist and targets an LTS Node line', () => {
    const sources = lines
      .filter((l) => l.startsWith('COPY ') && !l.includes('--from'))
      .flatMap((l) => l.split(/\s+/).slice(1, -1));
    for (const source of sources) expect(existsSync(join(root, source)), source).toBe(true);
    for (const from of lines.filter((l) => l.startsWith('FROM '))) {
      const major = Number(/node:(\d+)/.exec(from)?.[1]);
      expect(major % 2, `${from} should be an even (LTS) Node line`).toBe(0);
      // Node 20 is past its end of life; the image runs the current LTS.
      expect(major).toBeGreaterThanOrEqual(24);
    }
  });

  /**
   * Runs the daemon with its exact command and ENV, ADMIN_HOST set to `adminHost` (unset: the
   * default), and then its HEALTHCHECK as the engine runs it: in the container, with the same ENV.
   * Gives the probe's exit code.
   */
  const healthcheckOfDaemon = async (adminHost: string | undefined): Promise<number> => {
    const env: Record<string, string> = {};
    for (const line of finalStage.filter((l) => l.startsWith('ENV '))) {
      const [name, ...value] = line.slice(4).split('=');
      env[name!.trim()] = value.join('=').trim();
    }
    expect(env.DATA_DIR).toBe('/data');
    // Stands in for the /data volume and for the ports a container would publish.
    const adminPort = String(await freePort());
    Object.assign(env, {
      DATA_DIR: mkdtempSync(join(tmpdir(), 'rm-docker-')),
      ADMIN_PORT: adminPort,
      HTTP_PORT: String(await freePort()),
    });
    if (adminHost !== undefined) env.ADMIN_HOST = adminHost;
    const [command, ...args] = [...jsonArrayOf('ENTRYPOINT'), ...jsonArrayOf('CMD')];
    expect(command).toBe('node');
    const daemon = spawn(process.execPath, args, { cwd: root, env: cliEnv(env), stdio: 'ignore' });
    const exited = once(daemon, 'exit');
    let probeCode: number;
    try {
      // Where the admin server listens: a wildcard is reached on the loopback.
      const reachable = (adminHost ?? '0.0.0.0').replace(/^(0\.0\.0\.0|::)$/, '127.0.0.1');
      const url = new URL(`http://${isIPv6(reachable) ? `[${reachable}]` : reachable}:${adminPort}/healthz`);
      expect((await waitForHttp(url.href)).status).toBe(200);
      const healthcheck = jsonArrayOf('HEALTHCHECK');
      expect(healthcheck[0]).toBe('node');
      const probe = spawn(process.execPath, healthcheck.slice(1), { env: cliEnv(env), stdio: 'ignore' });
      [probeCode] = (await once(probe, 'exit')) as [number];
    } finally {
      daemon.kill('SIGTERM');
    }
    const [code] = await exited;
    expect(code).toBe(0);
    return probeCode;
  };

  it('starts the daemon with its exact command, passes its HEALTHCHECK and stops cleanly', async () => {
    expect(await healthcheckOfDaemon(undefined)).toBe(0);
  });

  // The probe must reach the admin server wherever ADMIN_HOST binds it: on a specific address
  // only that address answers, and a container polled on another is restarted for ever.
  it.each([
    ['a specific IPv4 address', '127.0.0.2'],
    ['a specific IPv6 address', '::1'],
    ['the IPv6 wildcard', '::'],
    ['the IPv4 wildcard', '0.0.0.0'],
  ])('passes its HEALTHCHECK with ADMIN_HOST set to %s (%s)', async (_what, adminHost) => {
    expect(await healthcheckOfDaemon(adminHost)).toBe(0);
  });
});
