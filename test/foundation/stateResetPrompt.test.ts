import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, cliEnv } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

/**
 * `state reset` at its confirmation prompt, on a real terminal: util-linux `script` gives the
 * command a pseudo-terminal, and what is written to script's stdin is typed on it (in raw mode, a
 * Ctrl-C is the byte 0x03 that readline reads, not a signal).
 */
describe('state reset at its confirmation prompt', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'rm-state-reset-'));
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  /** Starts the command on a terminal, types `keys` once it asks, and returns what it printed and how it ended. */
  const answerPrompt = async (keys: string) => {
    const child = spawn(
      'script',
      ['-qfec', `'${process.execPath}' '${CLI}' state reset --job reviews`, '/dev/null'],
      {
        env: cliEnv({ DATA_DIR: dataDir }),
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      output += d;
    });
    const exited = once(child, 'exit');
    await waitFor(() => output.includes('[y/N]'), 30_000);
    child.stdin.write(keys);
    const [code] = (await exited) as [number | null];
    child.stdin.end();
    return { code, output };
  };

  for (const [name, keys] of [
    ['Ctrl-C', '\x03'],
    ['Ctrl-D', '\x04'],
  ] as const) {
    it(`ends at once on ${name}, non-zero, saying nothing changed`, async () => {
      const { code, output } = await answerPrompt(keys);
      expect(output).toContain(
        'review-mirror: state reset: interrupted at the confirmation; nothing changed',
      );
      expect(code).toBe(1);
    });
  }

  it('changes nothing on an answer other than yes', async () => {
    const { code, output } = await answerPrompt('n\r');
    expect(output).toContain('review-mirror: state reset: not confirmed; nothing changed');
    expect(code).toBe(1);
  });
});
