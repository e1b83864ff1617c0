import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
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

  it('starts the daemon with its exact command, passes its HEALTHCHECK and stops cleanly', async () => {
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
    const [command, ...args] = [...jsonArrayOf('ENTRYPOINT'), ...jsonArrayOf('CMD')];
    expect(command).toBe('node');
    const daemon = spawn(process.execPath, args, { cwd: root, env: cliEnv(env), stdio: 'ignore' });
    const exited = once(daemon, 'exit');
    try {
      expect((await waitForHttp(`http://127.0.0.1:${adminPort}/healthz`)).status).toBe(200);
      const healthcheck = jsonArrayOf('HEALTHCHECK');
      expect(healthcheck[0]).toBe('node');
      const probe = spawn(process.execPath, healthcheck.slice(1), { env: cliEnv(env), stdio: 'ignore' });
      const [probeCode] = await once(probe, 'exit');
      expect(probeCode).toBe(0);
    } finally {
      daemon.kill('SIGTERM');
    }
    const [code] = await exited;
    expect(code).toBe(0);
  });
});
