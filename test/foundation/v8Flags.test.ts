import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const V8_FLAGS = fileURLToPath(new URL('../../dist/src/v8Flags.js', import.meta.url));

/**
 * Allocates 200 MB in short-lived objects, a fifth of them kept for a while (as a page's rows are
 * until the page is written), and prints the young generation's size in MB afterwards.
 */
const CHURN = `
  import { getHeapSpaceStatistics } from 'node:v8';
  let kept = [];
  for (let i = 0; i < 2_000_000; i++) {
    const row = { id: i, text: 'review ' + i, tags: [i, i + 1] };
    if (i % 5 === 0) kept.push(row);
    if (kept.length > 50_000) kept = [];
  }
  const young = getHeapSpaceStatistics().find((space) => space.space_name === 'new_space');
  console.log(young.space_size / 1e6);
`;

/** The young generation's size after the churn, and what V8 printed (an unknown flag is an error there). */
async function youngGenerationMb(preamble: string): Promise<{ mb: number; stderr: string }> {
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [
    '--input-type=module',
    '--eval',
    `${preamble}\n${CHURN}`,
  ]);
  return { mb: Number(stdout.trim()), stderr };
}

/**
 * This Node knows every flag the CLI sets before anything else (src/v8Flags.ts), and honours them
 * at run time: after Node 20 the young generation stays at its first size; on Node 20 it grows as
 * by default. What old space's growth saves shows at a backfill's scale, in the benchmark's peaks.
 */
describe("the CLI's V8 flags", () => {
  it('are known to this Node, and keep the young generation at its first size after Node 20', async () => {
    const [without, withFlags] = await Promise.all([
      youngGenerationMb(''),
      youngGenerationMb(`import ${JSON.stringify(V8_FLAGS)};`),
    ]);
    // V8 reports a flag it does not know ("unrecognized flag") on stderr and goes on without it.
    expect(withFlags.stderr).toBe('');
    expect(without.mb).toBeGreaterThan(8);
    if (Number(process.versions.node.split('.')[0]) > 20) expect(withFlags.mb).toBeLessThanOrEqual(4);
    else expect(withFlags.mb).toBe(without.mb);
  });
});
